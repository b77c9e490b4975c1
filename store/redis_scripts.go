package store

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts of the Redis store. Each runs atomically on the Redis
// server, reads time from it (TIME) and touches only the four keys of one
// budget, passed through KEYS. The prelude is shared by all of them.
var (
	//go:embed lua/prelude.lua
	luaPrelude string
	//go:embed lua/reserve_window.lua
	luaReserveWindow string
	//go:embed lua/reserve_linear.lua
	luaReserveLinear string
	//go:embed lua/confirm.lua
	luaConfirm string
	//go:embed lua/release.lua
	luaRelease string
	//go:embed lua/cooldown.lua
	luaCooldown string
	//go:embed lua/status.lua
	luaStatus string
	//go:embed lua/leave.lua
	luaLeave string
	//go:embed lua/ping.lua
	luaPing string
)

var (
	scriptReserveWindow = script(luaReserveWindow)
	scriptReserveLinear = script(luaReserveLinear)
	scriptConfirm       = script(luaConfirm)
	scriptRelease       = script(luaRelease)
	scriptCooldown      = script(luaCooldown)
	scriptStatus        = script(luaStatus)
	scriptLeave         = script(luaLeave)
	scriptPing          = script(luaPing)
)

func script(body string) *redis.Script { return redis.NewScript(luaPrelude + "\n" + body) }

// redisKeys returns the four Redis keys of a budget. They all carry the
// budget key as their hash tag, so that they live in one Cluster slot.
func redisKeys(key string) []string {
	tag := "{" + key + "}"
	return []string{tag + ":w", tag + ":f", tag + ":m", tag + ":p"}
}
