package store_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// decision is when the store let a request go: between from and to.
type decision struct{ from, to time.Time }

// sendThrough takes a slot of s the way the limiter does - reserve, sleep,
// confirm until told to go - and returns when the store said go.
func sendThrough(ctx context.Context, s store.Store, key string, p store.Policy) (decision, error) {
	from := time.Now()
	res, err := s.Reserve(ctx, key, p, anyWait)
	if err != nil || res.Wait == 0 {
		return decision{from, time.Now()}, err
	}
	wait := res.Wait
	for wait > 0 {
		time.Sleep(wait) // the waiter's timer
		from = time.Now()
		if wait, err = s.Confirm(ctx, key, res.ID); err != nil {
			return decision{}, err
		}
	}
	return decision{from, time.Now()}, nil
}

// TestRedisStoresShareOneExactWindow has three stores - three processes'
// worth - send through one budget from many goroutines each, more than a
// timespan ahead, and checks that the store's decisions keep every rolling
// timespan within the limit. A decision is only known to fall between the
// start of the call that returned it and the call's return, so a window is
// proven over the limit only when limit+1 of those intervals fit in less
// than a timespan; the goroutines' own scheduling then cannot fail it.
func TestRedisStoresShareOneExactWindow(t *testing.T) {
	srv := redistest.Start(t)
	const limit, span, stores, workers, each = 20, 500 * time.Millisecond, 3, 15, 4
	p := store.Policy{Strategy: store.Window, Limit: limit, Timespan: span}
	var mu sync.Mutex
	var sent []decision
	var wg sync.WaitGroup
	for range stores {
		s := store.NewRedis(srv.Client(), store.RedisOptions{})
		t.Cleanup(func() { _ = s.Close() })
		for range workers {
			wg.Go(func() {
				for range each {
					d, err := sendThrough(context.Background(), s, "k", p)
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					sent = append(sent, d)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	require.Len(t, sent, stores*workers*each)
	slices.SortFunc(sent, func(a, b decision) int { return a.from.Compare(b.from) })
	for i := 0; i+limit < len(sent); i++ {
		last := sent[i].to
		for _, d := range sent[i+1 : i+limit+1] {
			if d.to.After(last) {
				last = d.to
			}
		}
		assert.GreaterOrEqual(t, last.Sub(sent[i].from), span,
			"sends %d to %d were all decided within less than a timespan", i, i+limit)
	}
	// Waiters that wake late send late and the window holds on the
	// instants they leave, so lateness costs a little of the budget each
	// timespan: more under the race detector.
	elapsed := sent[len(sent)-1].to.Sub(sent[0].from)
	ideal := time.Duration(len(sent)/limit-1) * span
	use := 0.95
	if raceDetector {
		use = 0.90
	}
	assert.Less(t, elapsed, time.Duration(float64(ideal)/use), "at least %.0f%% of the budget is used: exactly, the last send comes %v after the first", use*100, ideal)
}
