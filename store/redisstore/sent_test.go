package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

var deferredAtOnce = store.Request{MaxWait: store.NoMaxWait, Deferred: true}

func TestRedisSentIsRecordedWhereTheRequestLeftNotWhenTheStoreLearnsIt(t *testing.T) {
	_, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: 10 * time.Second}
	a, err := s.Reserve(ctx, "k", p, deferredAtOnce)
	require.NoError(t, err)
	require.Zero(t, a.Wait)
	require.NotZero(t, a.ID)

	redisstore.Advance(s, time.Second)
	c, err := s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	require.InDelta(t, float64(9*time.Second), float64(c.Wait), float64(redisTolerance), "a counts from its slot, at 0s")

	redisstore.Advance(s, 2*time.Second)
	s.Sent("k", a.ID) // a leaves at 3s, after waiting for a seat
	redisstore.Advance(s, 2*time.Second)
	redisstore.FlushSent(s) // and the store records it at 5s

	left, err := s.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	assert.InDelta(t, float64(8*time.Second), float64(left), float64(redisTolerance), "c moved to a timespan after a left, 13s, not after it was recorded")
	_, err = s.Confirm(ctx, "k", a.ID)
	assert.ErrorIs(t, err, store.ErrUnknownReservation, "a is spent")
}

func TestRedisSentOfAnUnknownReservationDoesNothing(t *testing.T) {
	_, s := startStore(t)
	s.Sent("nobody", 0)
	s.Sent("nobody", 42)
	redisstore.FlushSent(s)
	res, err := s.Reserve(context.Background(), "nobody", store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: time.Second}, anyWait)
	require.NoError(t, err)
	assert.Zero(t, res.Wait)
}

// Sends recorded together are each recorded where its own request left.
func TestRedisSendsRecordedTogetherCountFromWhereEachLeft(t *testing.T) {
	_, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 3, Timespan: 10 * time.Second}
	var ids []uint64
	for range 3 {
		r, err := s.Reserve(ctx, "k", p, deferredAtOnce)
		require.NoError(t, err)
		require.Zero(t, r.Wait)
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		redisstore.Advance(s, time.Second)
		s.Sent("k", id) // they leave at 1s, 2s and 3s
	}
	redisstore.Advance(s, 2*time.Second)
	redisstore.FlushSent(s) // recorded at 5s

	var waits []time.Duration
	for range 3 {
		r, err := s.Reserve(ctx, "k", p, anyWait)
		require.NoError(t, err)
		waits = append(waits, r.Wait)
	}
	for i, want := range []time.Duration{6 * time.Second, 7 * time.Second, 8 * time.Second} {
		assert.InDelta(t, float64(want), float64(waits[i]), float64(redisTolerance), "request %d waits a timespan after the send it follows", i)
	}
	for _, id := range ids {
		_, err := s.Confirm(ctx, "k", id)
		assert.ErrorIs(t, err, store.ErrUnknownReservation, "spent")
	}
}
