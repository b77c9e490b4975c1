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
	//go:embed lua/lag.lua
	luaLag string
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
	name    string // its name in the library ("": a plain script)
	body    string // its own code, after hot.lua (and prelude.lua)
	prelude bool   // it runs after prelude.lua too

	fn    string        // its function's name, set with the library
	fnArg any           // fn as an argument, made once
	eval  *redis.Script // the same code as one script
}

// The scripts a request runs, kept to a few commands each.
var (
	scriptReserveWindow = &script{name: "reserve_window", body: luaReserveWindow}
	scriptReserveLinear = &script{name: "reserve_linear", body: luaReserveLinear}
	scriptConfirm       = &script{name: "confirm", body: luaConfirm}
	scriptRelease       = &script{name: "release", body: luaRelease}
	scriptSent          = &script{name: "sent", body: luaSent}
	scriptLag           = &script{name: "lag", body: luaLag}
)

// The scripts off a request's path. The two of the shared concurrency
// limit use none of hot.lua and run as plain scripts.
var (
	scriptUpkeep   = &script{name: "upkeep", body: luaUpkeep, prelude: true}
	scriptCooldown = &script{name: "cooldown", body: luaCooldown, prelude: true}
	scriptStatus   = &script{name: "status", body: luaStatus, prelude: true}
	scriptLeave    = &script{name: "leave", body: luaLeave, prelude: true}
	scriptLearn    = &script{name: "learn", body: luaLearn, prelude: true}
	scriptShareCut = &script{eval: redis.NewScript(luaShareCut)}
	scriptLastCut  = &script{eval: redis.NewScript(luaLastCut)}
)

// library is the code of the store's Redis Functions library, and
// libraryName its name. Every script that starts with hot.lua is a
// function of it, so that hot.lua's and prelude.lua's functions are made
// once, when the library loads, not on every call. The name carries a
// digest of the code: each version of the store loads its own library
// beside the others', and processes of different versions share a
// budget during a rolling upgrade.
var library, libraryName = buildLibrary(scriptReserveWindow, scriptReserveLinear, scriptConfirm, scriptRelease,
	scriptSent, scriptLag, scriptUpkeep, scriptCooldown, scriptStatus, scriptLeave, scriptLearn)

// libraryPrefix starts the names of the store's libraries, of every
// version.
const libraryPrefix = "k8sratelimit_"

// buildLibrary returns the library of scripts, in their order, and its
// name, and sets each script's function name and its code as one script.
func buildLibrary(scripts ...*script) (code, name string) {
	// The functions' names start with the library's, which is known only
	// once the code is: the code is digested with a placeholder there.
	const placeholder = "@library@"
	var body strings.Builder
	body.WriteString(luaHot + "\n" + luaPrelude + "\n")
	for _, sc := range scripts {
		body.WriteString("redis.register_function('" + placeholder + "_" + sc.name + "', function(k, a)\nbegin(k, a)\n" + sc.body + "\nend)\n")
	}
	sum := sha1.Sum([]byte(body.String()))
	name = libraryPrefix + hex.EncodeToString(sum[:8])
	for _, sc := range scripts {
		sc.fn = name + "_" + sc.name
		sc.fnArg = sc.fn
		prelude := ""
		if sc.prelude {
			prelude = luaPrelude
		}
		sc.eval = redis.NewScript(evalText(prelude, sc.body))
	}
	return "#!lua name=" + name + "\n" + strings.ReplaceAll(body.String(), placeholder, name), name
}

// evalText is the code of a script of hot.lua run as one EVAL: hot.lua,
// then prelude, begin and body.
func evalText(prelude, body string) string {
	return "local k_, a_ = KEYS, ARGV\n" + luaHot + "\n" + prelude + "\nbegin(k_, a_)\n" + body
}

// layout names the layout of a budget's keys and of what they hold. It is
// part of every key's name: processes whose layouts differ keep separate
// budgets rather than misread each other's (see docs/redis.md on
// upgrades). Until a first tagged release, any change to the keys or the
// scripts' records changes it.
const layout = "v1"

// redisKeys returns the five Redis keys of a budget. They all carry the
// budget key as their hash tag, so that they live in one Cluster slot.
func redisKeys(key string) []string {
	tag := "{" + key + "}:" + layout
	return []string{tag + ":w", tag + ":f", tag + ":m", tag + ":p", tag + ":s"}
}
