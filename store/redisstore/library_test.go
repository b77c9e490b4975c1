package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
	"github.com/k8sratelimit/k8sratelimit/store/storetest"
)

// commandCalls returns how many times the server ran each of cmds since
// its statistics were last reset.
func commandCalls(t *testing.T, c *redis.Client, cmds ...string) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range cmds {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				n := 0
				for _, r := range rest {
					if r < '0' || r > '9' {
						break
					}
					n = n*10 + int(r-'0')
				}
				out[cmd] = n
			}
		}
	}
	return out
}

// The store loads its scripts as one library of functions and calls them
// with FCALL, not EVALSHA.
func TestRedisRunsItsScriptsAsFunctions(t *testing.T) {
	client, s := startStore(t)
	ctx := context.Background()
	require.NoError(t, client.ConfigResetStat(ctx).Err())
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: time.Minute}
	for range 3 {
		_, err := s.Reserve(ctx, "k", p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err)
	}
	libs, err := client.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: redisstore.LibraryName}).Result()
	require.NoError(t, err)
	require.Len(t, libs, 1, "the store's library is loaded")
	assert.NotEmpty(t, libs[0].Functions)
	calls := commandCalls(t, client, "fcall", "evalsha", "eval")
	assert.GreaterOrEqual(t, calls["fcall"], 3, "each decision is a function call")
	assert.Zero(t, calls["evalsha"]+calls["eval"], "no script is run as EVAL")
}

// A server that lost the library (a restart without persistence,
// FUNCTION FLUSH) gets it again on the next call, which goes on.
func TestRedisLoadsItsLibraryAgainWhenTheServerLosesIt(t *testing.T) {
	client, s := startStore(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: time.Minute}
	_, err := s.Reserve(ctx, "k8s:a:b", p, store.Request{MaxWait: store.NoMaxWait})
	require.NoError(t, err)
	require.NoError(t, client.FunctionFlush(ctx).Err())
	res, err := s.Reserve(ctx, "k8s:a:b", p, store.Request{MaxWait: store.NoMaxWait})
	require.NoError(t, err)
	assert.True(t, res.OK)
	st, err := s.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st, 1)
	assert.Equal(t, 2, st[0].Used, "both sends count")
}

// scriptsOnly returns a client of srv as a user that may run scripts but
// not FUNCTION, as on servers where functions are disabled.
func scriptsOnly(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	admin := srv.Client()
	require.NoError(t, admin.Do(context.Background(), "ACL", "SETUSER", "scripts", "on", "nopass", "~*", "&*", "+@all", "-function").Err())
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "scripts", Password: "any"}) // nopass takes any
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Where the server refuses FUNCTION LOAD, the store runs the same code as
// scripts, and keeps every rule of a store.
func TestRedisConformanceWhereFunctionsAreRefused(t *testing.T) {
	srv := redistest.Start(t)
	client := scriptsOnly(t, srv)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		require.NoError(t, client.FlushAll(context.Background()).Err())
		return redisHarness(t, client)
	})
	libs, err := srv.Client().FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	assert.Empty(t, libs, "no library was loaded")
	calls := commandCalls(t, srv.Client(), "evalsha")
	assert.Positive(t, calls["evalsha"], "the scripts ran as EVALSHA")
}
