package memorystore

import (
	"slices"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// linear is the state of a budget under store.StrategyLinear: the generic
// cell rate algorithm. tat is the theoretical arrival time: a request may
// be sent at tat - tau, where tau = (burst-1) * interval is the burst
// allowance, and each request moves tat one interval on.
//
// A released reservation leaves tat where it is (the requests after it
// stay valid) and its slot in freed, for a newcomer to claim.
type linear struct {
	tat   int64
	freed []int64 // sorted
}

// reserve reserves the earliest slot at or after now (and after the
// cooldown's end cd) for a request, following the package rules on jitter
// and max wait. It returns the reserved instant, or ok false with the
// instant the request would have had.
func (g *linear) reserve(now, cd, interval, tau int64, r store.Request) (slot int64, ok bool) {
	g.dropFreedBefore(now)
	t0 := max(now, cd)
	slot = max(t0, g.tat-tau)

	if i, found := slices.BinarySearch(g.freed, t0); i < len(g.freed) && (found || g.freed[i] > t0) && g.freed[i] <= slot {
		slot = g.freed[i]
		if slot-now > int64(r.MaxWait) {
			return slot, false
		}
		g.freed = slices.Delete(g.freed, i, i+1)
		return slot, true
	}

	wait := slot - now
	var j int64
	if wait > 0 {
		j = jitterWithin(wait, r)
		slot += j
		wait += j
	}
	if wait > int64(r.MaxWait) {
		return slot, false
	}
	g.tat = max(g.tat, t0) + interval + j
	return slot, true
}

func (g *linear) dropFreedBefore(now int64) {
	i, _ := slices.BinarySearch(g.freed, now)
	if i > 0 {
		g.freed = slices.Delete(g.freed, 0, i)
	}
}

// release records the slot at of a released reservation for a newcomer.
func (g *linear) release(at int64) {
	i, _ := slices.BinarySearch(g.freed, at)
	g.freed = slices.Insert(g.freed, i, at)
}

// shift moves the schedule after now later by delta: tat and the freed
// slots still ahead.
func (g *linear) shift(now, delta int64) {
	if g.tat > now {
		g.tat += delta
	}
	for i := range g.freed {
		if g.freed[i] > now {
			g.freed[i] += delta
		}
	}
}

// idleAt returns the instant from which the budget is full again.
func (g *linear) idleAt() int64 {
	if n := len(g.freed); n > 0 {
		return max(g.tat, g.freed[n-1])
	}
	return g.tat
}
