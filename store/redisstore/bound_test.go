package redisstore_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// boundPolicy has room for every request of the bound tests.
var boundPolicy = store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: time.Minute}

const boundKey = "k8s:bound:api.example.com"

// newBoundStore returns a store with the default timeout (500ms).
func newBoundStore(t *testing.T, srv *redistest.Server, policy store.FailurePolicy, ev *events) *redisstore.Store {
	t.Helper()
	s, err := redisstore.NewFromURL(srv.URL(), redisstore.Options{Failure: policy, OnEvent: ev.add})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestRedisDecidesARequestThatMayNotWait(t *testing.T) {
	srv := redistest.Start(t)
	var ev events
	s := newBoundStore(t, srv, store.FailureLocal, &ev)
	for i := range 50 {
		res, err := s.Reserve(context.Background(), boundKey, boundPolicy, store.Request{MaxWait: 0})
		require.NoError(t, err)
		assert.True(t, res.OK, "request %d", i)
	}
	assert.Zero(t, ev.count(store.EventFallback), "a round trip is not a wait: Redis decides with max wait 0")
	st, err := s.Status(context.Background())
	require.NoError(t, err)
	require.Len(t, st, 1)
	assert.Equal(t, 50, st[0].Used, "Redis counted every request")
}

func TestRedisFrozenDecidesARequestByItsMaxWait(t *testing.T) {
	srv := redistest.Start(t)
	t.Cleanup(srv.Resume)
	var ev events
	s := newBoundStore(t, srv, store.FailureLocal, &ev)
	_, err := s.Reserve(context.Background(), boundKey, boundPolicy, store.Request{MaxWait: 0})
	require.NoError(t, err)

	srv.Pause()
	const maxWait = 100 * time.Millisecond
	start := time.Now()
	res, err := s.Reserve(context.Background(), boundKey, boundPolicy, store.Request{MaxWait: maxWait})
	took := time.Since(start)
	require.NoError(t, err)
	assert.True(t, res.OK, "the local budget admits it")
	assert.Less(t, took, maxWait+150*time.Millisecond, "decided within its max wait, not the store's 500ms timeout")
	assert.False(t, s.Down(), "one request's bound does not start an outage")
	assert.Equal(t, 1, ev.count(store.EventFallback))
	// The store marks the outage, then reports it.
	require.Eventually(t, func() bool { return s.Down() && ev.count(store.EventDown) > 0 }, 3*time.Second, 10*time.Millisecond,
		"the background check finds Redis silent past the store's timeout")
	assert.Equal(t, 1, ev.count(store.EventDown))

	srv.Resume()
	require.Eventually(t, func() bool { return !s.Down() }, 5*time.Second, 10*time.Millisecond)
	st, err := s.Status(context.Background())
	require.NoError(t, err)
	require.Len(t, st, 1)
	assert.GreaterOrEqual(t, st[0].Used, 2, "Redis counts the request decided without it")
}

// A request refused by FailureClosed because its call was cut short by its
// max wait says when to try again, as every closed refusal does.
func TestRedisFrozenClosedRefusalSaysWhenToRetry(t *testing.T) {
	srv := redistest.Start(t)
	t.Cleanup(srv.Resume)
	var ev events
	s := newBoundStore(t, srv, store.FailureClosed, &ev)
	_, err := s.Reserve(context.Background(), boundKey, boundPolicy, store.Request{MaxWait: 0})
	require.NoError(t, err)

	srv.Pause()
	_, err = s.Reserve(context.Background(), boundKey, boundPolicy, store.Request{MaxWait: 0})
	require.Error(t, err)
	var hasRetryAfter rlerrors.HasRetryAfter
	require.ErrorAs(t, err, &hasRetryAfter, "a caller honouring it does not spin: %v", err)
	assert.GreaterOrEqual(t, hasRetryAfter.RetryAfter(), 100*time.Millisecond)
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "it wraps the call's timeout: %v", err)
}
