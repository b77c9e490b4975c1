// Package benchref holds the reference limiters that the benchmarks of the
// store and limiter packages run beside their own, so that each comparison
// is made in the same process, on the same machine, in one run:
// golang.org/x/time/rate's Allow and client-go's token bucket TryAccept
// (the default limiter of every rest.Config), both with a limit they never
// reach.
package benchref

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// Key is the budget key the store benchmarks use.
const Key = "k8s:default:https://apiserver.example:6443"

// DefaultPolicy is the default configuration: 400 per minute, window.
var DefaultPolicy = store.Policy{Strategy: store.StrategyWindow, Limit: 400, Timespan: time.Minute}

// ManyBudgets is how many budgets the memory benchmarks fill a store with.
const ManyBudgets = 10_000

// BudgetKeys returns n distinct budget keys.
func BudgetKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k8s:default:https://apiserver-%05d.example:6443", i)
	}
	return keys
}

// RateAllow returns x/time/rate's Allow on a limiter that always has room.
func RateAllow() func() bool {
	return rate.NewLimiter(rate.Limit(1e12), 1_000_000_000).Allow
}

// RateAllowInf returns Allow on a rate.Inf limiter, which returns before
// any arithmetic.
func RateAllowInf() func() bool {
	return rate.NewLimiter(rate.Inf, 0).Allow
}

// FlowcontrolTryAccept returns client-go's token bucket TryAccept on a
// limiter that always has room.
func FlowcontrolTryAccept() func() bool {
	return flowcontrol.NewTokenBucketRateLimiter(1e12, 1_000_000_000).TryAccept
}

// Admit benchmarks admit, serial and with b.RunParallel, failing if it
// ever refuses.
func Admit(b *testing.B, newAdmit func() func() bool) {
	b.Run("serial", func(b *testing.B) {
		admit := newAdmit()
		b.ReportAllocs()
		for b.Loop() {
			if !admit() {
				b.Fatal("refused with room to spare")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		admit := newAdmit()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !admit() {
					b.Error("refused with room to spare")
					return
				}
			}
		})
	})
}

// block is how many calls of one kind Paired makes in a row before
// switching to the next kind.
const block = 256

// Paired runs the kinds in turn, block calls at a time, for b.N calls in
// all, timing each block, and fails if any refuses. It reports each kind's
// ns per call and, for each of the first ours kinds, its ratio to each of
// the others. Interleaving in short blocks exposes every kind to the same
// background load, which a busy machine otherwise skews between separate
// benchmarks.
func Paired(b *testing.B, names []string, kinds []func() bool, ours int) {
	ns := make([]int64, len(kinds))
	ops := make([]int64, len(kinds))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := (done / block) % len(kinds)
		n := min(block, b.N-done)
		f := kinds[k]
		start := time.Now()
		for range n {
			if !f() {
				b.Fatalf("%s refused a request with room to spare", names[k])
			}
		}
		ns[k] += time.Since(start).Nanoseconds()
		ops[k] += int64(n)
		done += n
	}
	if ops[len(kinds)-1] == 0 {
		return // too few calls to compare
	}
	per := make([]float64, len(kinds))
	for k := range kinds {
		per[k] = float64(ns[k]) / float64(ops[k])
		b.ReportMetric(per[k], names[k]+"-ns/call")
	}
	for mine := range ours {
		for theirs := ours; theirs < len(kinds); theirs++ {
			b.ReportMetric(per[mine]/per[theirs], names[mine]+"/"+names[theirs])
		}
	}
}
