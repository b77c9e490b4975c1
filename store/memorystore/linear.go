package memorystore

import (
	"iter"
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
	interval int64
	tau      int64
	tat      int64
	freed    []int64 // sorted
}

// setPolicy implements schedule.
func (g *linear) setPolicy(p store.Policy) {
	limit, span := limits(p)
	g.interval = max(span/int64(limit), 1)
	g.tau = int64(max(p.Burst, 1)-1) * g.interval
}

// reserve implements schedule. The slots carry no ID: id is unused.
func (g *linear) reserve(now, cd int64, _ uint64, r store.Request) (slot int64, ok bool) {
	interval, tau := g.interval, g.tau
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

// release implements schedule: it records the slot at for a newcomer.
func (g *linear) release(_ uint64, at int64) {
	i, _ := slices.BinarySearch(g.freed, at)
	g.freed = slices.Insert(g.freed, i, at)
}

// shift implements schedule: tat and the freed slots still ahead move
// by as much as brings the earliest of them and of pending to until.
func (g *linear) shift(now, until int64, pending iter.Seq[int64]) int64 {
	earliest := earliestAfter(now, -1, pending)
	earliest = earliestAfter(now, earliest, slices.Values(g.freed))
	if earliest < 0 || earliest >= until {
		return 0
	}
	delta := until - earliest
	if g.tat > now {
		g.tat += delta
	}
	for i := range g.freed {
		if g.freed[i] > now {
			g.freed[i] += delta
		}
	}
	return delta
}

// earliestAfter returns the earliest of earliest (-1: none) and the
// instants of ats after now.
func earliestAfter(now, earliest int64, ats iter.Seq[int64]) int64 {
	for at := range ats {
		if at > now && (earliest < 0 || at < earliest) {
			earliest = at
		}
	}
	return earliest
}

// sendLate implements schedule: the cell rate algorithm records no send
// instants, so a request that leaves late leaves now, or when a cooldown
// set meanwhile ends.
func (g *linear) sendLate(_ uint64, _, now, cd int64, _ func(uint64, int64)) int64 {
	return max(now, cd)
}

// sent implements schedule: linear records no send instants.
func (g *linear) sent(uint64, int64) {}

// seed implements schedule: each send moves tat one interval on.
func (g *linear) seed(at, _ int64) { g.tat = max(g.tat, at) + g.interval }

// idleAt implements schedule: the instant from which the budget is full
// again.
func (g *linear) idleAt() int64 {
	if n := len(g.freed); n > 0 {
		return max(g.tat, g.freed[n-1])
	}
	return g.tat
}
