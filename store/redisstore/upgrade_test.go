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

// A budget written by the earlier layout, every send an entry of the
// sorted set, is read as it is: its sends count, its reservations stay.
func TestRedisReadsABudgetOfTheEarlierLayout(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 3, Timespan: 10 * time.Second}
	now := serverMicros(t, client)
	const earlier = "0123456789ab"
	require.NoError(t, client.ZAdd(ctx, "{k}:w",
		redis.Z{Score: now - 2e6, Member: "=r0000000000001:" + earlier},
		redis.Z{Score: now - 1e6, Member: "=r0000000000002:" + earlier},
		redis.Z{Score: now + 2e6, Member: "r0000000000003:" + earlier}, // waiting
	).Err())
	require.NoError(t, client.ZAdd(ctx, "{k}:p", redis.Z{Score: now + 60e6, Member: earlier}).Err())

	res, err := s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.InDelta(t, float64(8*time.Second), float64(res.Wait), float64(redisTolerance), "a timespan after the earliest of the three")
	_, err = client.ZScore(ctx, "{k}:w", "r0000000000003:"+earlier).Result()
	assert.NoError(t, err, "the earlier process's reservation is kept")
}

// While a process of the earlier version shares a budget, sends are kept
// where it counts them; once it has gone, in the ring.
func TestRedisKeepsSendsWhereAnEarlierVersionCountsThem(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: 10 * time.Second}
	const earlier = "0123456789ab"
	require.NoError(t, client.ZAdd(ctx, "{k}:p", redis.Z{Score: serverMicros(t, client) + 60e6, Member: earlier}).Err())
	send := func() {
		t.Helper()
		res, err := s.Reserve(ctx, "k", p, store.Request{})
		require.NoError(t, err)
		require.True(t, res.OK && res.Wait == 0, "admitted at once: %+v", res)
	}

	send()
	assert.EqualValues(t, 1, windowEntries(t, client, "k"), "a send the earlier version counts")
	assert.Zero(t, ringSends(t, client, "k"))

	require.NoError(t, client.ZRem(ctx, "{k}:p", earlier).Err()) // it leaves
	send()
	assert.EqualValues(t, 1, windowEntries(t, client, "k"))
	assert.Equal(t, 1, ringSends(t, client, "k"), "only this version shares it now")
}

// A budget of the earlier layout keeps the latest slot it gave in M's last
// field: this version's first decision takes it from there, so that slots
// are still given in order.
func TestRedisTakesTheLatestSlotFromTheEarlierLayout(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: 10 * time.Second}
	require.NoError(t, client.HSet(ctx, "{k}:m", "last", serverMicros(t, client)+3e6).Err())

	res, err := s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.InDelta(t, float64(3*time.Second), float64(res.Wait), float64(redisTolerance), "after the latest slot the earlier layout gave")
}

// While a process of the earlier version shares a budget, the latest slot
// given is written where that version reads it, and read from there too:
// the two versions give slots in one order.
func TestRedisSharesTheLatestSlotWithAnEarlierVersion(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: 10 * time.Second}
	const earlier = "0123456789ab"
	now := serverMicros(t, client)
	require.NoError(t, client.ZAdd(ctx, "{k}:p", redis.Z{Score: now + 60e6, Member: earlier}).Err())

	res, err := s.Reserve(ctx, "k", p, store.Request{})
	require.NoError(t, err)
	require.True(t, res.OK && res.Wait == 0, "admitted at once: %+v", res)
	last, err := client.HGet(ctx, "{k}:m", "last").Float64()
	require.NoError(t, err, "the slot given is written where the earlier version reads it")
	assert.InDelta(t, now, last, float64(redisTolerance/time.Microsecond))

	// The earlier version gives a slot 3s ahead.
	require.NoError(t, client.HSet(ctx, "{k}:m", "last", now+3e6).Err())
	res, err = s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.InDelta(t, float64(3*time.Second), float64(res.Wait), float64(redisTolerance), "after the slot the earlier version gave")
}
