package redisstore_test

import (
	"context"
	"fmt"
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

// redisTolerance is how far a wait reported by the Redis store may be from
// the exact one: the server's clock runs on while a test talks to it.
const redisTolerance = 100 * time.Millisecond

// startStore starts a redis-server for the test and returns a client of
// it and a store on that client with opts (none: the defaults), closed
// when the test ends.
func startStore(t *testing.T, opts ...redisstore.Options) (*redis.Client, *redisstore.Store) {
	t.Helper()
	client := redistest.Start(t).Client()
	var o redisstore.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	s := redisstore.New(client, o)
	t.Cleanup(func() { _ = s.Close() })
	return client, s
}

// redisHarness returns the conformance suite's harness of a new store on
// client, closed when t ends.
func redisHarness(t *testing.T, client redis.UniversalClient) storetest.Harness {
	s := redisstore.New(client, redisstore.Options{})
	t.Cleanup(func() { _ = s.Close() })
	return storetest.Harness{Store: s, Advance: func(d time.Duration) { redisstore.Advance(s, d) }, Now: func() time.Duration { return redisstore.Now(s) }, Tolerance: redisTolerance}
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		require.NoError(t, client.FlushAll(context.Background()).Err())
		return redisHarness(t, client)
	})
}

func TestRedisKeysShareOneSlot(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	// A cluster-enabled server computes slots for CLUSTER KEYSLOT.
	slotter := redistest.Start(t, "--cluster-enabled", "yes").Client()
	s := redisstore.New(client, redisstore.Options{})
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	key := "k8s:team-a:rancher.example.com/k8s/clusters/c-abc"
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: time.Minute}
	for range 2 {
		_, err := s.Reserve(ctx, key, p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err)
	}
	keys, err := client.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	slots := map[int64]bool{}
	for _, k := range keys {
		assert.Contains(t, k, key, "every Redis key of a budget contains its budget key")
		ttl, err := client.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "key %s expires by itself", k)
		slot, err := slotter.ClusterKeySlot(ctx, k).Result()
		require.NoError(t, err)
		slots[slot] = true
	}
	assert.Len(t, slots, 1, "all keys of a budget map to one Cluster slot: %v", keys)
}

// TestRedisClusterConformance runs the conformance suite through a cluster
// client against a real Redis Cluster of three primaries: every script
// passes all its keys through KEYS, in one slot, or Redis refuses it.
func TestRedisClusterConformance(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		require.NoError(t, cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
			return c.FlushAll(ctx).Err()
		}))
		return redisHarness(t, cc)
	})
}

// TestRedisClusterBudgetsFromEveryPrimary checks that status finds the
// budgets on every primary of a cluster.
func TestRedisClusterBudgetsFromEveryPrimary(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	ctx := context.Background()
	s := redisstore.New(cc, redisstore.Options{})
	t.Cleanup(func() { _ = s.Close() })
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: time.Minute}
	var keys []string
	for i := range 12 {
		key := fmt.Sprintf("k8s:ops:api-%d.example.com", i)
		keys = append(keys, key)
		_, err := s.Reserve(ctx, key, p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err)
	}
	budgets, err := s.Status(ctx)
	require.NoError(t, err)
	var found []string
	for _, b := range budgets {
		found = append(found, b.Key)
		assert.Equal(t, 1, b.Used, b.Key)
		assert.Equal(t, 10, b.Limit, b.Key)
	}
	assert.ElementsMatch(t, keys, found)
}
