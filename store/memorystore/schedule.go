package memorystore

import (
	"iter"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// schedule is a budget's state under one strategy: the send instants it
// has given out and the arithmetic that gives the next, in nanoseconds of
// store time. window and linear implement it; the budget holds one and
// never asks which. Every method is called with the budget's lock held.
type schedule interface {
	// setPolicy makes the schedule follow p from now on, keeping its
	// state.
	setPolicy(p store.Policy)
	// reserve reserves the earliest slot at or after now, and after the
	// cooldown's end cd, for the reservation id, following store.Request's
	// rules on jitter and max wait. It returns the reserved instant, or ok
	// false with the instant the request would have had.
	reserve(now, cd int64, id uint64, r store.Request) (slot int64, ok bool)
	// sendLate records that the reservation id, reserved at slot, is
	// confirmed at now, later than its slot, and returns when it may
	// leave: now, or the end cd of a cooldown set meanwhile, or later when
	// the requests already sent leave no room until then. moved is called for every other reservation it moves.
	sendLate(id uint64, slot, now, cd int64, moved func(id uint64, at int64)) int64
	// sent records that the reservation id leaves at its slot, on time:
	// no late send moves it from there.
	sent(id uint64, slot int64)
	// release gives the slot at of the reservation id back, for a
	// newcomer to claim.
	release(id uint64, at int64)
	// shift moves the schedule after now later by one amount, so that the
	// earliest of its instants and of pending, the slots of the deferred
	// reservations, comes no sooner than until, and returns that amount: 0
	// when nothing had to move.
	shift(now, until int64, pending iter.Seq[int64]) int64
	// seed records a send made at the instant at, before now.
	seed(at, now int64)
	// idleAt returns the instant from which the schedule constrains
	// nothing.
	idleAt() int64
}

var (
	_ schedule = (*window)(nil)
	_ schedule = (*linear)(nil)
)

// limits returns a policy's limit and timespan in the schedule's units,
// at least 1 each.
func limits(p store.Policy) (limit int, span int64) {
	return max(p.Limit, 1), max(int64(p.Timespan), 1)
}
