package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts of the Redis store. Each runs atomically on the Redis
// server, reads time from it (TIME) and touches only the five keys of one
// budget, passed through KEYS. hot.lua starts every script; prelude.lua
// adds what the upkeep scripts share.
var (
	//go:embed lua/hot.lua
	luaHot string
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
	//go:embed lua/sent.lua
	luaSent string
	//go:embed lua/cooldown.lua
	luaCooldown string
	//go:embed lua/status.lua
	luaStatus string
	//go:embed lua/leave.lua
	luaLeave string
	//go:embed lua/upkeep.lua
	luaUpkeep string
	//go:embed lua/learn.lua
	luaLearn string
	//go:embed lua/share_cut.lua
	luaShareCut string
	//go:embed lua/last_cut.lua
	luaLastCut string
)

// The scripts a request runs, kept to a few commands each.
var (
	scriptReserveWindow = redis.NewScript(luaHot + "\n" + luaReserveWindow)
	scriptReserveLinear = redis.NewScript(luaHot + "\n" + luaReserveLinear)
	scriptConfirm       = redis.NewScript(luaHot + "\n" + luaConfirm)
	scriptRelease       = redis.NewScript(luaHot + "\n" + luaRelease)
	scriptSent          = redis.NewScript(luaHot + "\n" + luaSent)
)

// The scripts off a request's path.
var (
	scriptUpkeep   = upkeepScript(luaUpkeep)
	scriptCooldown = upkeepScript(luaCooldown)
	scriptStatus   = upkeepScript(luaStatus)
	scriptLeave    = upkeepScript(luaLeave)
	scriptLearn    = upkeepScript(luaLearn)
	scriptShareCut = redis.NewScript(luaShareCut)
	scriptLastCut  = redis.NewScript(luaLastCut)
)

func upkeepScript(body string) *redis.Script {
	return redis.NewScript(luaHot + "\n" + luaPrelude + "\n" + body)
}

// redisKeys returns the five Redis keys of a budget. They all carry the
// budget key as their hash tag, so that they live in one Cluster slot.
func redisKeys(key string) []string {
	tag := "{" + key + "}"
	return []string{tag + ":w", tag + ":f", tag + ":m", tag + ":p", tag + ":s"}
}
