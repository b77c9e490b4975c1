package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// linearTwoPer10s sends one request every 5s, no burst.
var linearTwoPer10s = store.Policy{Strategy: store.StrategyLinear, Limit: 2, Timespan: 10 * time.Second}

func TestRedisLinearConfirmationLongAfterItsSlotIsSent(t *testing.T) {
	// A presence that outlasts the test's jumps of time: this process
	// stays present throughout.
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	_, err := s.Reserve(ctx, "k", linearTwoPer10s, anyWait)
	require.NoError(t, err)
	late, err := s.Reserve(ctx, "k", linearTwoPer10s, anyWait)
	require.NoError(t, err)
	require.InDelta(t, float64(5*time.Second), float64(late.Wait), float64(redisTolerance))
	member := redisstore.Member(s, "k", late.ID)

	// Past the next renewal (a minute), which drops the reservation a
	// timespan past its slot.
	redisstore.Advance(s, 80*time.Second)
	res, err := s.Reserve(ctx, "k", linearTwoPer10s, anyWait)
	require.NoError(t, err)
	require.Zero(t, res.Wait)
	_, err = client.ZScore(ctx, "{k}:v1:w", member).Result()
	require.ErrorIs(t, err, redis.Nil, "renew dropped the reservation")

	left, err := s.Confirm(ctx, "k", late.ID)
	require.NoError(t, err)
	assert.Zero(t, left, "the theoretical arrival time counted it: it is sent at once, as the memory store sends it")
}

func TestRedisLinearReservationFreedForALapseIsReservedAgain(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	// a's presence lasts 150ms after its last refresh.
	a := redisstore.New(srv.Client(), redisstore.Options{Presence: 100 * time.Millisecond})
	t.Cleanup(func() { _ = a.Close() })
	b := redisstore.New(srv.Client(), redisstore.Options{Presence: time.Hour})
	t.Cleanup(func() { _ = b.Close() })
	_, err := a.Reserve(ctx, "k", linearTwoPer10s, anyWait)
	require.NoError(t, err)
	late, err := a.Reserve(ctx, "k", linearTwoPer10s, anyWait)
	require.NoError(t, err)
	require.InDelta(t, float64(5*time.Second), float64(late.Wait), float64(redisTolerance))

	// b finds a's presence lapsed and frees its reservation ahead.
	redisstore.Advance(b, time.Second)
	require.NoError(t, redisstore.UpkeepNow(b))

	// Long after, b fills the budget; a comes back and confirms.
	redisstore.Advance(a, 80*time.Second)
	redisstore.Advance(b, 79*time.Second)
	for range 2 {
		_, err := b.Reserve(ctx, "k", linearTwoPer10s, anyWait)
		require.NoError(t, err)
	}
	left, err := a.Confirm(ctx, "k", late.ID)
	require.NoError(t, err)
	assert.InDelta(t, float64(10*time.Second), float64(left), float64(redisTolerance),
		"its slot was freed: it takes a slot again, after b's two, instead of being sent uncounted")
}

// A request kept as a send at its slot that waits for a seat longer than
// a timespan finds its entry gone when it asks to leave; taking a slot
// again, it leaves at once and is counted as a send where it leaves, not
// as a reservation that a late send could move on.
func TestRedisARequestThatTakesASlotAgainAndLeavesIsASend(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 2, Timespan: 10 * time.Second}
	a, err := s.Reserve(ctx, "k", p, deferredAtOnce)
	require.NoError(t, err)
	require.Zero(t, a.Wait)

	redisstore.Advance(s, 11*time.Second)
	b, err := s.Reserve(ctx, "k", p, anyWait) // the window drops a's entry, a timespan old
	require.NoError(t, err)
	require.Zero(t, b.Wait)
	left, err := s.Confirm(ctx, "k", a.ID)
	require.NoError(t, err)
	assert.Zero(t, left, "room for it now")

	assert.Zero(t, windowEntries(t, client, "k"), "no reservation left behind")
	assert.Equal(t, 2, ringSends(t, client, "k"), "b and a, sent")
}
