package redisstore_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

func TestRedisSeatSharesAddUpToTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	const key = "k8s:seats:api.example.com"
	var stores []*redisstore.Store
	for range 3 {
		s := newURLStore(t, srv, store.FailureLocal, nil)
		_, err := s.Reserve(context.Background(), key, outagePolicy, anyWait)
		require.NoError(t, err)
		stores = append(stores, s)
	}
	for _, s := range stores {
		require.NoError(t, redisstore.UpkeepNow(s))
		redisstore.JoinOver(s)
	}
	for _, limit := range []int{1, 2, 3, 7, 100} {
		sum := 0
		for _, s := range stores {
			share, n := s.SeatShare(key, limit)
			assert.Equal(t, 3, n)
			assert.GreaterOrEqual(t, share, 1)
			assert.LessOrEqual(t, share, limit/3+1)
			sum += share
		}
		assert.Equal(t, max(limit, 3), sum, "limit %d: the shares add up to the limit (each at least 1)", limit)
	}
	share, n := stores[0].SeatShare("k8s:seats:unknown", 5)
	assert.Equal(t, []int{0, 0}, []int{share, n}, "a budget not counted yet: no processes counted, no share")
}

// A process that starts sharing a budget others use takes no seat until
// they have counted it and given up their seats over their new shares:
// they learn of it at their next decision, however long since they last
// counted the processes, and it waits joinWait.
func TestRedisNewcomerTakesNoSeatUntilTheOthersHaveCountedIt(t *testing.T) {
	srv := redistest.Start(t)
	const key = "k8s:seats:api.example.com"
	old, err := redisstore.NewFromURL(srv.URL(), redisstore.Options{Presence: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = old.Close() })
	old.OnCut(key, func(store.SeatCut) {}) // as a limiter with seats does: it listens on the budget's channel
	_, err = old.Reserve(t.Context(), key, outagePolicy, anyWait)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 1}, pair(old.SeatShare(key, 3)), "alone")
	redisstore.PastFirstUse(old) // it counts once an hour now

	newcomer := newURLStore(t, srv, store.FailureLocal, nil)
	assert.Equal(t, []int{0, 0}, pair(newcomer.SeatShare(key, 3)), "not counted yet")
	joining := time.Now() // its join begins when the reply to this counts the processes
	_, err = newcomer.Reserve(t.Context(), key, outagePolicy, anyWait)
	require.NoError(t, err)
	share, n := newcomer.SeatShare(key, 3)
	assert.Equal(t, 2, n, "its first decision counted both")
	assert.Zero(t, share, "no seat while the others give theirs up")

	require.Eventually(t, func() bool {
		_, err := old.Reserve(t.Context(), key, outagePolicy, anyWait)
		require.NoError(t, err)
		_, n := old.SeatShare(key, 3)
		return n == 2
	}, 10*time.Second, 5*time.Millisecond, "the others count the processes at their next decision once told of the newcomer")
	require.Eventually(t, func() bool {
		share, _ := newcomer.SeatShare(key, 3)
		return share > 0
	}, 10*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(joining), redisstore.JoinWait, "no seat for joinWait")
	assert.Equal(t, 3, first(old.SeatShare(key, 3))+first(newcomer.SeatShare(key, 3)), "then the shares add up to the limit")
}

// pair returns the two numbers as a slice, to compare them at once.
func pair(a, b int) []int { return []int{a, b} }

// first returns the first of two numbers.
func first(a, _ int) int { return a }

func TestRedisCutsReachTheOtherProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const key = "k8s:seats:api.example.com"
	a := newURLStore(t, srv, store.FailureLocal, nil)
	b := newURLStore(t, srv, store.FailureLocal, nil)
	gotA := make(chan store.SeatCut, 1)
	gotB := make(chan store.SeatCut, 1)
	a.OnCut(key, func(c store.SeatCut) { gotA <- c })
	b.OnCut(key, func(c store.SeatCut) { gotB <- c })

	cut := store.SeatCut{Limit: 3, Ceiling: 3, ProbeAfter: 30 * time.Second}
	require.Eventually(t, func() bool {
		a.ShareCut(key, cut) // until b's subscription is in place
		select {
		case got := <-gotB:
			assert.Equal(t, cut, got)
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, 5*time.Second, time.Millisecond)
	select {
	case c := <-gotA:
		t.Fatalf("a process is told of its own cut: %+v", c)
	case <-time.After(100 * time.Millisecond):
	}
}

// A process that starts sharing a budget after the others learned its
// limit starts from their last cut while it is in force, rather than
// drawing a throttle of its own to learn it.
func TestRedisAProcessStartingLaterLearnsTheCutInForce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		probe time.Duration
		learn bool
	}{{"in force", 30 * time.Second, true}, {"probed past", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k8s:seats:" + tc.name
			a := newURLStore(t, srv, store.FailureLocal, nil)
			_, err := a.Reserve(ctx, key, store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: time.Second}, anyWait)
			require.NoError(t, err)
			cut := store.SeatCut{Limit: 3, Ceiling: 4, ProbeAfter: tc.probe}
			a.ShareCut(key, cut)
			require.Eventually(t, func() bool {
				return srv.Client().HExists(ctx, "{"+key+"}:v1:m", "cut").Val()
			}, 5*time.Second, time.Millisecond, "the cut is kept with the budget")

			late := newURLStore(t, srv, store.FailureLocal, nil)
			got := make(chan store.SeatCut, 1)
			late.OnCut(key, func(c store.SeatCut) { got <- c })
			if !tc.learn {
				select {
				case c := <-got:
					t.Fatalf("a cut whose probe is due was applied: %+v", c)
				case <-time.After(200 * time.Millisecond):
				}
				return
			}
			select {
			case c := <-got:
				assert.Equal(t, []int{3, 4}, []int{c.Limit, c.Ceiling})
				assert.LessOrEqual(t, c.ProbeAfter, cut.ProbeAfter, "the time since the cut counts")
				assert.Greater(t, c.ProbeAfter, cut.ProbeAfter-5*time.Second)
			case <-time.After(5 * time.Second):
				t.Fatal("the cut in force was not applied")
			}
		})
	}
}

func TestProcessesSharingABudgetHoldNoMoreSeatsThanTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	const key = "k8s:seats:api.example.com"
	policy := store.Policy{Strategy: store.StrategyWindow, Limit: 10000, Timespan: time.Second}

	var inFlight, most atomic.Int32
	server := harness.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		n := inFlight.Add(1)
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		inFlight.Add(-1)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	})
	var transports []http.RoundTripper
	var stores []*redisstore.Store
	for range 2 {
		s := newURLStore(t, srv, store.FailureLocal, nil)
		l := limiter.New(s, limiter.Options{Policy: policy, Concurrency: limiter.Concurrency{Fixed: 3}})
		t.Cleanup(func() { l.Close() })
		b := l.Budget(key, "test")
		require.NoError(t, b.Wait(context.Background()))
		stores = append(stores, s)
		transports = append(transports, b.Wrap(server))
	}
	for _, s := range stores {
		require.NoError(t, redisstore.UpkeepNow(s))
		redisstore.JoinOver(s) // the steady state: the second has joined the first
	}
	shareA, _ := stores[0].SeatShare(key, 3)
	shareB, _ := stores[1].SeatShare(key, 3)
	assert.Equal(t, 3, shareA+shareB)

	var wg sync.WaitGroup
	for _, rt := range transports {
		for range 10 {
			wg.Go(func() {
				for range 20 {
					req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/api/v1/pods", nil)
					resp, err := rt.RoundTrip(req)
					if assert.NoError(t, err) {
						resp.Body.Close()
					}
				}
			})
		}
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(3), "two processes together never exceed the shared limit of 3")
	assert.Equal(t, int32(3), most.Load(), "and use all of it")
}

func TestAThrottleInOneProcessCutsTheOthersLimit(t *testing.T) {
	srv := redistest.Start(t)
	const key = "k8s:seats:api.example.com"
	policy := store.Policy{Strategy: store.StrategyWindow, Limit: 10000, Timespan: time.Second}
	var budgets []*limiter.Budget
	for range 2 {
		s := newURLStore(t, srv, store.FailureLocal, nil)
		l := limiter.New(s, limiter.Options{Policy: policy, Concurrency: limiter.Concurrency{Adaptive: true}})
		t.Cleanup(func() { l.Close() })
		budgets = append(budgets, l.Budget(key, "test"))
	}
	a, b := budgets[0], budgets[1]
	require.Equal(t, limiter.InitialConcurrency, b.Seats().Limit)

	throttling := harness.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: req}, nil
	})
	require.Eventually(t, func() bool {
		// Until b's subscription is in place, a's cuts go unheard; each
		// throttle after a second's cooldown cuts again.
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/api/v1/pods", nil)
		resp, err := a.Wrap(throttling).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return b.Seats().Limit == 1
	}, 10*time.Second, 10*time.Millisecond, "b adopts a's cut of the shared limit")
}

// Every message on a budget's channel is read without failing: another
// process's cut or rise as it was shared, or its joining the budget,
// anything else ignored.
func FuzzParseCut(f *testing.F) {
	s := redisstore.New(redistest.Start(f).Client(), redisstore.Options{})
	f.Cleanup(func() { _ = s.Close() })
	for _, seed := range []string{
		redisstore.CutMessage("other", store.SeatCut{Limit: 3, Ceiling: 4, ProbeAfter: 30 * time.Second}),
		redisstore.CutMessage("other", store.SeatCut{Limit: 3, Ceiling: 5, ProbeAfter: time.Second, Rise: true}),
		"moved", "cut:", "cut:a:1:1:1:rise:rise", "cut:a:-1:2:3", "cut:a:3:2:1", "cut:a:1:2:-5",
	} {
		f.Add(seed)
	}
	f.Add("join:other")
	f.Fuzz(func(t *testing.T, msg string) {
		if proc, ok := redisstore.ParseJoin(msg); ok {
			assert.NotEmpty(t, proc)
			assert.Equal(t, msg, "join:"+proc, "a join names the process that joined")
			_, isCut := redisstore.ParseCut(s, msg)
			assert.False(t, isCut, "a join is no cut")
		}
		c, ok := redisstore.ParseCut(s, msg)
		if !ok {
			return
		}
		assert.GreaterOrEqual(t, c.Limit, 1)
		assert.GreaterOrEqual(t, c.Ceiling, c.Limit)
		assert.GreaterOrEqual(t, c.ProbeAfter, time.Duration(0))
		again, ok := redisstore.ParseCut(s, redisstore.CutMessage("other", c))
		assert.True(t, ok)
		assert.Equal(t, c, again, "shared again, it reads the same")
	})
}

// seatsKey is the budget of the requests mayNotWait sends.
const seatsKey = "k8s:seats:api.example.com"

// mayNotWait returns a transport through a limiter of 3 seats on s whose
// requests may not wait, and a request to send through it.
func mayNotWait(t *testing.T, s store.Store) (http.RoundTripper, *http.Request) {
	t.Helper()
	never := time.Duration(0)
	l := limiter.New(s, limiter.Options{
		Policy:      store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: time.Second},
		Concurrency: limiter.Concurrency{Fixed: 3},
		MaxWait:     &never,
	})
	t.Cleanup(func() { l.Close() })
	rt := l.Budget(seatsKey, "test").Wrap(harness.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	}))
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/api/v1/pods", nil)
	return rt, req
}

// A request that may not wait is admitted on a shared budget's first use:
// its reservation counts the processes sharing the limit, and a seat of
// this process's share is free then.
func TestARequestThatMayNotWaitIsSeatedOnTheFirstUse(t *testing.T) {
	srv := redistest.Start(t)
	rt, req := mayNotWait(t, newURLStore(t, srv, store.FailureLocal, nil))
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
}

// A request that may not wait, refused while its process waits to join
// others on a budget, is told to wait out the join, not a seat's usual
// hold.
func TestARequestThatMayNotWaitIsToldToWaitOutTheJoin(t *testing.T) {
	srv := redistest.Start(t)
	old := newURLStore(t, srv, store.FailureLocal, nil)
	_, err := old.Reserve(t.Context(), seatsKey, outagePolicy, anyWait)
	require.NoError(t, err)

	rt, req := mayNotWait(t, newURLStore(t, srv, store.FailureLocal, nil))
	start := time.Now()
	_, err = rt.RoundTrip(req)
	var refused *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &refused, "no seat while the other process gives its own up")
	assert.Greater(t, refused.RetryAfter(), redisstore.JoinWait-time.Since(start), "at least what is left of the join")
	assert.LessOrEqual(t, refused.RetryAfter(), redisstore.JoinWait+time.Second, "the join and a seat's hold")
}
