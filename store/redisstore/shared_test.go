package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/decided"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// sendThrough takes a slot of s the way the limiter does - reserve, sleep,
// confirm until told to go - and returns the span of the call in which
// the store said go.
func sendThrough(ctx context.Context, s store.Store, key string, p store.Policy) (decided.Span, error) {
	from := time.Now()
	res, err := s.Reserve(ctx, key, p, anyWait)
	if err != nil || res.Wait == 0 {
		return decided.Span{From: from, To: time.Now()}, err
	}
	wait := res.Wait
	for wait > 0 {
		time.Sleep(wait) // the waiter's timer
		from = time.Now()
		if wait, err = s.Confirm(ctx, key, res.ID); err != nil {
			return decided.Span{}, err
		}
	}
	return decided.Span{From: from, To: time.Now()}, nil
}

// TestRedisStoresShareOneExactWindow has three stores - three processes'
// worth - send through one budget from many goroutines each, more than a
// timespan ahead, and checks that the store's decisions keep every rolling
// timespan within the limit. A decision is only known to fall between the
// start of the call that returned it and the call's return, so a window is
// proven over the limit only when limit+1 of those spans fit in less than
// a timespan (package decided); the goroutines' own scheduling then cannot
// fail it.
func TestRedisStoresShareOneExactWindow(t *testing.T) {
	srv := redistest.Start(t)
	const limit, span, stores, workers, each = 20, 500 * time.Millisecond, 3, 15, 4
	p := store.Policy{Strategy: store.StrategyWindow, Limit: limit, Timespan: span}
	var sent decided.Recorder
	var wg sync.WaitGroup
	for range stores {
		s := redisstore.New(srv.Client(), redisstore.Options{})
		t.Cleanup(func() { _ = s.Close() })
		for range workers {
			wg.Go(func() {
				for range each {
					d, err := sendThrough(context.Background(), s, "k", p)
					if !assert.NoError(t, err) {
						return
					}
					sent.Add(d.From, d.To)
				}
			})
		}
	}
	wg.Wait()
	spans := sent.Spans()
	require.Len(t, spans, stores*workers*each)
	c, ok := decided.Tightest(spans, limit+1)
	require.True(t, ok)
	assert.GreaterOrEqual(t, c.Within, span, "the window let %d requests go within a timespan: %v", limit+1, c)
	t.Logf("the closest %d decisions lie surely within %v, the widest of their spans %v", limit+1, c.Within, c.Widest())
	// Waiters that wake late send late and the window holds on the
	// instants they leave, so lateness costs a little of the budget each
	// timespan: more under the race detector.
	elapsed := spans[len(spans)-1].To.Sub(spans[0].From)
	ideal := time.Duration(len(spans)/limit-1) * span
	use := 0.95
	if harness.Race {
		use = 0.90
	}
	assert.Less(t, elapsed, time.Duration(float64(ideal)/use), "at least %.0f%% of the budget is used: exactly, the last send comes %v after the first", use*100, ideal)
}
