package memorystore_test

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// simRequest is one arrival of the simulation.
type simRequest struct {
	arrival  time.Time
	slot     time.Time // reserved, then moved by cooldowns
	wake     time.Time // when its timer fires: the slot, or a little later
	send     time.Time // when it was sent; zero while waiting
	deferred bool
	moved    bool // a cooldown moved it while it waited
	released bool
	id       uint64
}

// waitQueue orders waiting requests by wake-up, like the timers of
// waiters.
type waitQueue []*simRequest

func (q waitQueue) Len() int           { return len(q) }
func (q waitQueue) Less(i, j int) bool { return q[i].wake.Before(q[j].wake) }
func (q waitQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *waitQueue) Push(x any)        { *q = append(*q, x.(*simRequest)) }
func (q *waitQueue) Pop() any {
	old := *q
	r := old[len(old)-1]
	*q = old[:len(old)-1]
	return r
}

type simConfig struct {
	policy    store.Policy
	arrivals  int
	cancel    bool // release some waiting requests
	cooldowns bool
	jitter    time.Duration // up to this much, drawn per request
	late      time.Duration // waiters wake up to this much after their slot
	seed      uint64
}

// simulate drives a memory store on a fake clock with random arrivals,
// cooldowns and (optionally) cancellations, with each waiter confirming its
// slot when its timer fires, and returns every request and the cooldown
// ends.
func simulate(t *testing.T, cfg simConfig) ([]*simRequest, []time.Time) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(cfg.seed, 42))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	m := memorystore.New(clk)
	const key = "k8s:default:sim"
	interval := cfg.policy.Timespan / time.Duration(cfg.policy.Limit)

	var reqs []*simRequest
	var cooldownEnds []time.Time
	waiting := &waitQueue{}
	nextArrival := start
	arrived := 0

	lateness := func() time.Duration {
		if cfg.late <= 0 {
			return 0
		}
		return time.Duration(rng.Int64N(int64(cfg.late) + 1))
	}
	fire := func(now time.Time) {
		for waiting.Len() > 0 && !(*waiting)[0].wake.After(now) {
			r := heap.Pop(waiting).(*simRequest)
			left, err := m.Confirm(ctx, key, r.id)
			require.NoError(t, err)
			if left > 0 {
				r.slot, r.moved = now.Add(left), true
				r.wake = r.slot.Add(lateness())
				heap.Push(waiting, r)
				continue
			}
			r.send = now
		}
	}

	for arrived < cfg.arrivals || waiting.Len() > 0 {
		// Move the clock to the next event: an arrival or a waiter's slot.
		next := nextArrival
		if arrived >= cfg.arrivals || (waiting.Len() > 0 && (*waiting)[0].wake.Before(next)) {
			next = (*waiting)[0].wake
		}
		clk.SetTime(next)
		fire(next)
		if arrived >= cfg.arrivals || next.Before(nextArrival) {
			continue
		}

		now := clk.Now()
		var j time.Duration
		if cfg.jitter > 0 {
			j = time.Duration(rng.Int64N(int64(cfg.jitter) + 1))
		}
		res, err := m.Reserve(ctx, key, cfg.policy, store.Request{MaxWait: store.NoMaxWait, Jitter: j})
		require.NoError(t, err)
		require.True(t, res.OK)
		r := &simRequest{arrival: now, slot: now.Add(res.Wait), id: res.ID, deferred: res.Wait > 0}
		r.wake = r.slot.Add(lateness())
		reqs = append(reqs, r)
		if r.deferred {
			heap.Push(waiting, r)
		} else {
			r.send = now
		}
		arrived++

		switch x := rng.IntN(1000); {
		case cfg.cooldowns && x < 2:
			d := time.Duration(rng.Int64N(int64(3 * cfg.policy.Timespan)))
			left, err := m.SetCooldown(ctx, key, cfg.policy, d)
			require.NoError(t, err)
			cooldownEnds = append(cooldownEnds, now.Add(left))
			for _, w := range *waiting {
				if !w.slot.After(now) {
					continue // due, its waiter about to wake: a cooldown does not move it
				}
				left, err := m.Confirm(ctx, key, w.id)
				require.NoError(t, err)
				if moved := now.Add(left); !moved.Equal(w.slot) {
					w.slot, w.moved = moved, true
					w.wake = moved.Add(lateness())
				}
			}
			heap.Init(waiting)
		case cfg.cancel && x < 60 && waiting.Len() > 0:
			i := rng.IntN(waiting.Len())
			w := heap.Remove(waiting, i).(*simRequest)
			require.NoError(t, m.Release(ctx, key, w.id))
			w.released = true
		}
		// Bursts of arrivals at one instant, and gaps of up to two intervals.
		if rng.IntN(3) > 0 {
			nextArrival = now.Add(time.Duration(rng.Int64N(int64(2 * interval))))
		}
	}
	return reqs, cooldownEnds
}

func sends(reqs []*simRequest) []time.Time {
	var out []time.Time
	for _, r := range reqs {
		if !r.released {
			out = append(out, r.send)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// checkNoWindowOver fails when some rolling window of span holds more than
// n of the sorted send instants.
func checkNoWindowOver(t *testing.T, sorted []time.Time, n int, span time.Duration) {
	t.Helper()
	for i := n; i < len(sorted); i++ {
		if gap := sorted[i].Sub(sorted[i-n]); gap < span {
			t.Fatalf("%d sends within %v (sends %d and %d are %v apart)", n+1, span, i-n, i, gap)
		}
	}
}

// checkArrivalOrder fails when a request is sent before one that arrived
// earlier.
func checkArrivalOrder(t *testing.T, reqs []*simRequest) {
	t.Helper()
	for i := 1; i < len(reqs); i++ {
		if reqs[i].send.Before(reqs[i-1].send) {
			t.Fatalf("request %d was sent at %v, before request %d at %v", i, reqs[i].send, i-1, reqs[i-1].send)
		}
	}
}

func isCooldownEnd(ends []time.Time, t time.Time) bool {
	return slices.ContainsFunc(ends, t.Equal)
}

func TestPropertyWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  simConfig
	}{
		{"plain", simConfig{arrivals: 100_000, seed: 1}},
		{"cooldowns", simConfig{arrivals: 100_000, cooldowns: true, seed: 2}},
		{"cancellations and cooldowns", simConfig{arrivals: 100_000, cooldowns: true, cancel: true, seed: 3}},
		{"jitter, cancellations and cooldowns", simConfig{arrivals: 100_000, cooldowns: true, cancel: true, jitter: 300 * time.Millisecond, seed: 7}},
		// Waiters that wake late send late: the window holds on the instants
		// requests really leave.
		{"late waiters, jitter, cancellations and cooldowns", simConfig{arrivals: 100_000, cooldowns: true, cancel: true,
			jitter: 50 * time.Millisecond, late: 20 * time.Millisecond, seed: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.policy = store.Policy{Strategy: store.StrategyWindow, Limit: 50, Timespan: time.Second}
			reqs, ends := simulate(t, tc.cfg)
			sorted := sends(reqs)
			checkNoWindowOver(t, sorted, tc.cfg.policy.Limit, tc.cfg.policy.Timespan)
			if tc.cfg.cancel || tc.cfg.jitter > 0 || tc.cfg.late > 0 {
				return // order and tightness are promised without them
			}
			checkArrivalOrder(t, reqs)
			// No slot is left idle while requests wait: a deferred request was
			// sent at the first instant it could be, the end of a cooldown, the
			// instant of the send before it, or one timespan after the send
			// limit places earlier.
			for i, s := range sorted {
				r := reqs[i]
				if !r.deferred || r.moved {
					continue
				}
				tight := isCooldownEnd(ends, s) || (i > 0 && s.Equal(sorted[i-1])) ||
					(i >= tc.cfg.policy.Limit && s.Equal(sorted[i-tc.cfg.policy.Limit].Add(tc.cfg.policy.Timespan)))
				if !tight {
					t.Fatalf("request %d waited until %v though an earlier slot was free", i, s)
				}
			}
		})
	}
}

func TestPropertyLinear(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  simConfig
	}{
		{"plain", simConfig{arrivals: 100_000, seed: 4}},
		{"cooldowns", simConfig{arrivals: 100_000, cooldowns: true, seed: 5}},
		{"cancellations and cooldowns", simConfig{arrivals: 100_000, cooldowns: true, cancel: true, seed: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := store.Policy{Strategy: store.StrategyLinear, Limit: 50, Timespan: time.Second, Burst: 5}
			tc.cfg.policy = p
			reqs, ends := simulate(t, tc.cfg)
			sorted := sends(reqs)
			// GCRA lets at most limit + burst - 1 requests leave in a timespan.
			checkNoWindowOver(t, sorted, p.Limit+p.Burst-1, p.Timespan)
			if tc.cfg.cancel {
				return
			}
			checkArrivalOrder(t, reqs)
			interval := p.Timespan / time.Duration(p.Limit)
			tau := time.Duration(p.Burst-1) * interval
			var tat time.Time
			for i, r := range reqs {
				earliest := tat.Add(-tau)
				if r.deferred && !r.moved && !r.send.Equal(earliest) && !isCooldownEnd(ends, r.send) {
					t.Fatalf("request %d waited until %v though it conformed at %v", i, r.send, earliest)
				}
				if r.send.Before(earliest) {
					t.Fatalf("request %d sent at %v, before it conformed at %v", i, r.send, earliest)
				}
				if r.moved {
					// A cooldown moves a backlog as it is, so the schedule after a
					// moved request is that of a backlog: its burst stays used.
					tat = later(tat, r.send.Add(tau))
				}
				tat = later(tat, r.send).Add(interval)
			}
		})
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
