package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// serverMicros returns the Redis server's time in µs, as the scripts read
// it.
func serverMicros(t *testing.T, client *redis.Client) float64 {
	t.Helper()
	now, err := client.Time(context.Background()).Result()
	require.NoError(t, err)
	return float64(now.UnixMicro())
}

func TestRedisEntriesAtOneInstantSortInTheOrderReserved(t *testing.T) {
	client, s := startStore(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 100, Timespan: 10 * time.Second}
	// During a cooldown every reservation takes the cooldown's end: 40 of
	// them, enough for the IDs to pass from one base-36 digit to two.
	_, err := s.SetCooldown(ctx, "k", p, 5*time.Second)
	require.NoError(t, err)
	var want []string
	for range 40 {
		res, err := s.Reserve(ctx, "k", p, anyWait)
		require.NoError(t, err)
		require.NotZero(t, res.ID)
		want = append(want, redisstore.Member(s, "k", res.ID))
	}
	got, err := client.ZRangeByScore(ctx, "{k}:w", &redis.ZRangeBy{Min: "(0", Max: "+inf"}).Result()
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// The names a previous version wrote: a reservation "<process>:<id>", a
// released slot "~…". The scripts of this version read them during a
// rolling upgrade (docs/redis.md).
func TestRedisClaimsAReleasedSlotOfThePreviousNaming(t *testing.T) {
	client, s := startStore(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 2, Timespan: 10 * time.Second}
	res, err := s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	require.Zero(t, res.Wait, "sent at once, the budget's keys made")

	at := serverMicros(t, client) + 5e6
	const old = "~0123456789ab:5"
	require.NoError(t, client.ZAdd(ctx, "{k}:w", redis.Z{Score: at, Member: old}).Err())
	require.NoError(t, client.ZAdd(ctx, "{k}:f", redis.Z{Score: at, Member: old}).Err())
	require.NoError(t, client.HIncrBy(ctx, "{k}:m", "nf", 1).Err())

	res, err = s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.InDelta(t, float64(5*time.Second), float64(res.Wait), float64(redisTolerance),
		"the newcomer claims the released slot at 5s, before the window's next room at 10s")
	got, err := client.ZScore(ctx, "{k}:w", redisstore.Member(s, "k", res.ID)).Result()
	require.NoError(t, err)
	assert.Equal(t, at, got)
	n, err := client.ZCard(ctx, "{k}:f").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "only the placeholder is left of the released slots")
	_, err = client.ZScore(ctx, "{k}:w", old).Result()
	assert.ErrorIs(t, err, redis.Nil)
}

func TestRedisFreesALapsedProcessOfThePreviousNaming(t *testing.T) {
	client, s := startStore(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: 10 * time.Second}
	_, err := s.Reserve(ctx, "k", p, store.Request{MaxWait: 0})
	require.NoError(t, err)

	// A process of the previous version, whose presence has lapsed, holds
	// the slot at 10s.
	now := serverMicros(t, client)
	const lapsed = "0123456789ab"
	require.NoError(t, client.ZAdd(ctx, "{k}:w", redis.Z{Score: now + 10e6, Member: lapsed + ":7"}).Err())
	require.NoError(t, client.ZAdd(ctx, "{k}:p", redis.Z{Score: now - 1, Member: lapsed}).Err())
	res, err := s.Reserve(ctx, "k", p, store.Request{MaxWait: 15 * time.Second})
	require.NoError(t, err)
	assert.False(t, res.OK, "the slot at 10s is the lapsed process's until an upkeep frees it")

	require.NoError(t, redisstore.UpkeepNow(s))
	freed, err := client.ZRangeByScore(ctx, "{k}:f", &redis.ZRangeBy{Min: "(0", Max: "+inf"}).Result()
	require.NoError(t, err)
	assert.Len(t, freed, 1, "the upkeep frees the lapsed process's reservation")
	_, err = client.ZScore(ctx, "{k}:w", lapsed+":7").Result()
	assert.ErrorIs(t, err, redis.Nil)
	res, err = s.Reserve(ctx, "k", p, store.Request{MaxWait: 15 * time.Second})
	require.NoError(t, err)
	assert.True(t, res.OK)
	assert.InDelta(t, float64(10*time.Second), float64(res.Wait), float64(redisTolerance), "a newcomer claims it")
}
