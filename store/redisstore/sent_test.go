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
