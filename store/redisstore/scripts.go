package redisstore

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The Lua code of the Redis store. Each script runs atomically on the
// Redis server, reads time from it (TIME) and touches only the five keys
// of one budget, passed through KEYS. hot.lua defines what every script
// shares; prelude.lua adds what the upkeep scripts share.
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

// script is one of the store's scripts: a function of the store's library
// (see library), or the same code run by EVALSHA where the server refuses
// functions.
type script struct {
	fn   string        // its name in the library ("": a plain script)
	eval *redis.Script // the same code as one script
}

// The scripts a request runs, kept to a few commands each.
var (
	scriptReserveWindow = hotScript("reserve_window", luaReserveWindow)
	scriptReserveLinear = hotScript("reserve_linear", luaReserveLinear)
	scriptConfirm       = hotScript("confirm", luaConfirm)
	scriptRelease       = hotScript("release", luaRelease)
	scriptSent          = hotScript("sent", luaSent)
)

// The scripts off a request's path. The two of the shared concurrency
// limit use none of hot.lua and run as plain scripts.
var (
	scriptUpkeep   = upkeepScript("upkeep", luaUpkeep)
	scriptCooldown = upkeepScript("cooldown", luaCooldown)
	scriptStatus   = upkeepScript("status", luaStatus)
	scriptLeave    = upkeepScript("leave", luaLeave)
	scriptLearn    = upkeepScript("learn", luaLearn)
	scriptShareCut = &script{eval: redis.NewScript(luaShareCut)}
	scriptLastCut  = &script{eval: redis.NewScript(luaLastCut)}
)

// libraryScripts are the scripts of the library, in its order.
var libraryScripts = []struct {
	name, body string
}{
	{"reserve_window", luaReserveWindow},
	{"reserve_linear", luaReserveLinear},
	{"confirm", luaConfirm},
	{"release", luaRelease},
	{"sent", luaSent},
	{"upkeep", luaUpkeep},
	{"cooldown", luaCooldown},
	{"status", luaStatus},
	{"leave", luaLeave},
	{"learn", luaLearn},
}

// library is the code of the store's Redis Functions library, and
// libraryName its name. Every script that starts with hot.lua is a
// function of it, so that hot.lua's and prelude.lua's functions are made
// once, when the library loads, not on every call. The name carries a
// digest of the code: each version of the store loads its own library
// beside the others', and processes of different versions share a
// budget during a rolling upgrade.
var library, libraryName = buildLibrary()

// libraryPrefix starts the names of the store's libraries, of every
// version.
const libraryPrefix = "k8sratelimit_"

func buildLibrary() (code, name string) {
	// The functions' names start with the library's, which is known only
	// once the code is: the code is digested with a placeholder there.
	const placeholder = "@library@"
	var body strings.Builder
	body.WriteString(luaHot + "\n" + luaPrelude + "\n")
	for _, s := range libraryScripts {
		body.WriteString("redis.register_function('" + placeholder + "_" + s.name + "', function(k, a)\nbegin(k, a)\n" + s.body + "\nend)\n")
	}
	sum := sha1.Sum([]byte(body.String()))
	name = libraryPrefix + hex.EncodeToString(sum[:8])
	return "#!lua name=" + name + "\n" + strings.ReplaceAll(body.String(), placeholder, name), name
}

// evalText is the code of a script of hot.lua run as one EVAL: hot.lua,
// then prelude, begin and body.
func evalText(prelude, body string) string {
	return "local k_, a_ = KEYS, ARGV\n" + luaHot + "\n" + prelude + "\nbegin(k_, a_)\n" + body
}

func hotScript(name, body string) *script {
	return &script{fn: libraryName + "_" + name, eval: redis.NewScript(evalText("", body))}
}

func upkeepScript(name, body string) *script {
	return &script{fn: libraryName + "_" + name, eval: redis.NewScript(evalText(luaPrelude, body))}
}

// redisKeys returns the five Redis keys of a budget. They all carry the
// budget key as their hash tag, so that they live in one Cluster slot.
func redisKeys(key string) []string {
	tag := "{" + key + "}"
	return []string{tag + ":w", tag + ":f", tag + ":m", tag + ":p", tag + ":s"}
}
