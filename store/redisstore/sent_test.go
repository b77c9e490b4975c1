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

// reserveDeferred reserves n slots of budget "k" under p that are free
// now, kept to be confirmed by Sent, and returns their IDs.
func reserveDeferred(t *testing.T, s *redisstore.Store, p store.Policy, n int) []uint64 {
	t.Helper()
	var ids []uint64
	for range n {
		r, err := s.Reserve(context.Background(), "k", p, deferredAtOnce)
		require.NoError(t, err)
		require.Zero(t, r.Wait)
		ids = append(ids, r.ID)
	}
	return ids
}

// Sends recorded together are each recorded where its own request left.
func TestRedisSendsRecordedTogetherCountFromWhereEachLeft(t *testing.T) {
	_, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 3, Timespan: 10 * time.Second}
	ids := reserveDeferred(t, s, p, 3)
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

// Sends recorded together that would crowd a reservation a timespan after
// their slots are recorded one by one instead, and move it.
func TestRedisSendsRecordedTogetherMoveTheReservationTheyCrowd(t *testing.T) {
	_, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 3, Timespan: 10 * time.Second}
	ids := reserveDeferred(t, s, p, 2) // slots at 0s, kept to be confirmed
	redisstore.Advance(s, time.Second)
	x, err := s.Reserve(ctx, "k", p, anyWait) // sent at once, at 1s
	require.NoError(t, err)
	require.Zero(t, x.Wait)
	c, err := s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	require.InDelta(t, float64(9*time.Second), float64(c.Wait), float64(redisTolerance), "c comes a timespan after the slots at 0s, at 10s")

	for _, id := range ids {
		redisstore.Advance(s, time.Second)
		s.Sent("k", id) // they leave at 2s and 3s
	}
	redisstore.Advance(s, 2*time.Second)
	redisstore.FlushSent(s) // recorded at 5s

	left, err := s.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	assert.InDelta(t, float64(6*time.Second), float64(left), float64(redisTolerance), "c moved to a timespan after the send at 1s, 11s: the window's sends are at 1s, 2s and 3s")
	for _, id := range ids {
		_, err := s.Confirm(ctx, "k", id)
		assert.ErrorIs(t, err, store.ErrUnknownReservation, "spent")
	}
}

// The sends of two processes, each recorded in a batch of its own, count
// in the order their requests left: the second batch's land among the
// first's.
func TestRedisBatchesOfTwoProcessesInterleave(t *testing.T) {
	client, a := startStore(t, redisstore.Options{Presence: time.Hour})
	b := redisstore.New(client, redisstore.Options{Presence: time.Hour})
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 4, Timespan: 10 * time.Second}
	stores := []*redisstore.Store{a, b}
	ids := map[*redisstore.Store][]uint64{a: reserveDeferred(t, a, p, 2), b: reserveDeferred(t, b, p, 2)} // slots at 0s
	advance := func(d time.Duration) {
		for _, s := range stores {
			redisstore.Advance(s, d)
		}
	}
	for i := range 2 {
		for _, s := range stores {
			advance(time.Second)
			s.Sent("k", ids[s][i]) // a's leave at 1s and 3s, b's at 2s and 4s
		}
	}
	advance(time.Second)
	redisstore.FlushSent(a) // recorded at 5s: 1s and 3s
	redisstore.FlushSent(b) // then 2s and 4s, among them

	for i, want := range []time.Duration{6 * time.Second, 7 * time.Second, 8 * time.Second, 9 * time.Second} {
		r, err := a.Reserve(ctx, "k", p, anyWait)
		require.NoError(t, err)
		assert.InDelta(t, float64(want), float64(r.Wait), float64(redisTolerance), "request %d comes a timespan after the send at %ds", i, i+1)
	}
}
