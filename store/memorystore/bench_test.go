package memorystore_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/internal/benchref"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// The admission benchmarks measure a request admitted at once, on a budget
// with room to spare: they time the decision, never a sleep. The serial
// variants fail on any request that is not admitted at once. The parallel
// ones count them ("deferred", with the longest wait in "maxwait-ns") and
// release them: the store reads its clock before locking the budget, so a
// goroutine held up between the two decides with a stale time and can be
// deferred although the budget has room (see BENCHMARKS.md).
//
// benchWindow admits up to 100 requests per microsecond (one per 10ns) and
// keeps 100-150 live entries at benchmark speed, the same order as the
// default of 400 per minute in full use. benchLinear spaces requests 1ns
// apart with a burst of a million.
var (
	benchWindow = store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: 10 * time.Microsecond}
	benchLinear = store.Policy{Strategy: store.StrategyLinear, Limit: 1_000_000, Timespan: time.Millisecond, Burst: 1_000_000}
)

var benchStrategies = []struct {
	name   string
	policy store.Policy
}{
	{"window", benchWindow},
	{"linear", benchLinear},
}

func BenchmarkMemoryReserve(b *testing.B) {
	ctx := context.Background()
	for _, s := range benchStrategies {
		b.Run(s.name+"/serial", func(b *testing.B) {
			m := memorystore.New(nil)
			b.ReportAllocs()
			for b.Loop() {
				res, err := m.Reserve(ctx, benchref.Key, s.policy, store.Request{MaxWait: store.NoMaxWait})
				if err != nil || !res.OK || res.Wait != 0 {
					b.Fatalf("Reserve = %+v, %v; want admitted at once", res, err)
				}
			}
		})
		b.Run(s.name+"/parallel", func(b *testing.B) {
			m := memorystore.New(nil)
			var deferred atomic.Int64
			var maxWait atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := m.Reserve(ctx, benchref.Key, s.policy, store.Request{MaxWait: store.NoMaxWait})
					if err != nil || !res.OK {
						b.Errorf("Reserve = %+v, %v; want admitted at once", res, err)
						return
					}
					if res.Wait != 0 {
						deferred.Add(1)
						benchStoreMax(&maxWait, int64(res.Wait))
						_ = m.Release(ctx, benchref.Key, res.ID)
					}
				}
			})
			b.ReportMetric(float64(deferred.Load()), "deferred")
			b.ReportMetric(float64(maxWait.Load()), "maxwait-ns")
		})
	}
}

// benchStoreMax raises m to v when v is larger.
func benchStoreMax(m *atomic.Int64, v int64) {
	for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
	}
}

// BenchmarkAdmissionPaired is Store.Reserve (both strategies) against
// x/time/rate's Allow and flowcontrol's TryAccept on one goroutine, taking
// turns in short blocks, each block timed: all kinds see the
// same background load, which a busy machine otherwise skews between
// separate benchmarks. It reports each kind's ns per call and the ratios
// of the store's cost over theirs.
func BenchmarkAdmissionPaired(b *testing.B) {
	ctx := context.Background()
	m := memorystore.New(nil)
	reserve := func(p store.Policy, key string) func() bool {
		return func() bool {
			res, err := m.Reserve(ctx, key, p, store.Request{MaxWait: store.NoMaxWait})
			return err == nil && res.OK && res.Wait == 0
		}
	}
	names := []string{"window", "linear", "rate", "flowcontrol"}
	kinds := []func() bool{reserve(benchWindow, benchref.Key), reserve(benchLinear, benchref.Key+"/linear"), benchref.RateAllow(), benchref.FlowcontrolTryAccept()}
	benchref.Paired(b, names, kinds, 2)
}

func benchHeapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkMemory10kBudgets reports the heap the in-memory store holds for
// 10,000 budgets in use under policy, with perBudget requests sent on each
// (B/budget), and what it still holds once they are idle and a Reserve on
// another key has swept them (B-after-drop, for the whole store). The keys
// are made beforehand: they belong to the caller and are not counted.
// ns/op is the time to fill and drain the store, a by-product.
func BenchmarkMemory10kBudgets(b *testing.B) {
	cases := []struct {
		name      string
		policy    store.Policy
		perBudget int
	}{
		{"window-400-per-minute/1-request", benchref.DefaultPolicy, 1},
		{"window-400-per-minute/400-requests", benchref.DefaultPolicy, 400},
		{"linear-400-per-minute/1-request", store.Policy{Strategy: store.StrategyLinear, Limit: 400, Timespan: time.Minute}, 1},
	}
	ctx := context.Background()
	keys := benchref.BudgetKeys(benchref.ManyBudgets)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var perBudget, afterDrop float64
			for b.Loop() {
				clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				base := benchHeapInUse()
				m := memorystore.New(clk)
				for _, k := range keys {
					for range c.perBudget {
						res, err := m.Reserve(ctx, k, c.policy, store.Request{MaxWait: store.NoMaxWait})
						if err != nil || !res.OK {
							b.Fatalf("Reserve = %+v, %v", res, err)
						}
					}
				}
				if got := m.Len(); got != benchref.ManyBudgets {
					b.Fatalf("Len() = %d, want %d", got, benchref.ManyBudgets)
				}
				full := benchHeapInUse()

				clk.SetTime(clk.Now().Add(c.policy.Timespan + time.Second))
				if _, err := m.Reserve(ctx, "k8s:default:https://other.example:6443", c.policy, store.Request{}); err != nil {
					b.Fatal(err)
				}
				if got := m.Len(); got != 1 {
					b.Fatalf("Len() after the idle sweep = %d, want 1", got)
				}
				drained := benchHeapInUse()
				runtime.KeepAlive(m)

				perBudget = float64(int64(full)-int64(base)) / benchref.ManyBudgets
				afterDrop = float64(int64(drained) - int64(base))
			}
			b.ReportMetric(perBudget, "B/budget")
			b.ReportMetric(afterDrop, "B-after-drop")
		})
	}
	runtime.KeepAlive(keys)
}

// TestMemoryDropsIdleBudgets checks that budgets are dropped once idle,
// without a background goroutine: a Reserve made after they went idle
// sweeps them, and a budget that still constrains something is kept. A
// window budget goes idle one timespan after its last request; a linear one
// when it is full again, one interval after a lone request.
func TestMemoryDropsIdleBudgets(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		policy  store.Policy
		horizon time.Duration // how long one request keeps a budget busy
	}{
		{"window", benchref.DefaultPolicy, benchref.DefaultPolicy.Timespan},
		{"linear", store.Policy{Strategy: store.StrategyLinear, Limit: 10, Timespan: time.Minute, Burst: 10}, 6 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			m := memorystore.New(clk)
			reserve := func(key string) {
				t.Helper()
				res, err := m.Reserve(ctx, key, c.policy, store.Request{})
				if err != nil || !res.OK || res.Wait != 0 {
					t.Fatalf("Reserve(%s) = %+v, %v; want admitted at once", key, res, err)
				}
			}

			keys := benchref.BudgetKeys(benchref.ManyBudgets)
			for _, k := range keys {
				reserve(k)
			}
			if got := m.Len(); got != benchref.ManyBudgets {
				t.Fatalf("Len() = %d, want %d", got, benchref.ManyBudgets)
			}

			// Halfway, one budget is used again (and a sweep runs: the
			// horizons are well over a second). Nothing is idle yet.
			clk.SetTime(clk.Now().Add(c.horizon / 2))
			reserve(keys[0])
			if got := m.Len(); got != benchref.ManyBudgets {
				t.Fatalf("Len() halfway = %d, want %d", got, benchref.ManyBudgets)
			}

			// Just past the horizon of the first requests, every budget but
			// keys[0] is idle: a Reserve on a new key sweeps them.
			clk.SetTime(clk.Now().Add(c.horizon/2 + time.Nanosecond))
			reserve("k8s:default:https://other.example:6443")
			if got := m.Len(); got != 2 {
				t.Fatalf("Len() after the sweep = %d, want 2 (keys[0] and the new key)", got)
			}

			// A dropped budget is made afresh when used again.
			reserve(keys[1])
			if got := m.Len(); got != 3 {
				t.Fatalf("Len() = %d, want 3", got)
			}

			// Once everything is idle, the next sweep leaves only the
			// budget of the Reserve that triggered it.
			clk.SetTime(clk.Now().Add(c.policy.Timespan + time.Second))
			reserve(keys[2])
			if got := m.Len(); got != 1 {
				t.Fatalf("Len() after everything went idle = %d, want 1", got)
			}
		})
	}
}

// TestMemoryKeepsBusyBudgets checks that the sweep keeps a budget that
// still constrains something: a deferred reservation ahead, or a cooldown.
func TestMemoryKeepsBusyBudgets(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := memorystore.New(clk)
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: time.Minute}

	// "waiter": one sent now, one deferred by a minute.
	for range 2 {
		if res, err := m.Reserve(ctx, "waiter", p, store.Request{MaxWait: store.NoMaxWait}); err != nil || !res.OK {
			t.Fatalf("Reserve(waiter) = %+v, %v", res, err)
		}
	}
	// "cooling": a cooldown of an hour.
	if _, err := m.SetCooldown(ctx, "cooling", p, time.Hour); err != nil {
		t.Fatal(err)
	}
	// "idle": one request, nothing else.
	if _, err := m.Reserve(ctx, "idle", p, store.Request{}); err != nil {
		t.Fatal(err)
	}

	// 90s on: "idle" went idle at 1m; the deferred request of "waiter" is
	// constraining until 2m; "cooling" until 1h.
	clk.SetTime(clk.Now().Add(90 * time.Second))
	if _, err := m.Reserve(ctx, "sweeper", p, store.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := m.Len(); got != 3 {
		t.Fatalf("Len() = %d, want 3 (waiter, cooling, sweeper)", got)
	}
	if left, err := m.Cooldown(ctx, "cooling"); err != nil || left <= 0 {
		t.Fatalf("Cooldown(cooling) = %v, %v; want the cooldown kept", left, err)
	}
}
