// Package store is the contract between the budget engine (package
// limiter) and where budgets live. It holds no store and imports nothing
// outside the standard library; the stores are its subpackages:
// memorystore (in-process, the default) and redisstore (shared through
// Redis), and storetest is the conformance suite that every store passes.
//
// Its exported names are the ones both sides of the contract need: the
// Store interface and what it takes and returns (Policy with its Strategy,
// Request, Reservation, NoMaxWait, ErrUnknownReservation); the optional
// interfaces a store may implement and the engine or the root look for
// (Notifier, SeatSharer with SeatCut, Sender, Failover); and what a shared store
// is configured with and reports (FailurePolicy, Event, BudgetStatus). The
// root package re-exports Strategy and FailurePolicy with type aliases.
//
// A store decides admissions from its own clock: the in-memory store from
// the clock it is given, a shared store from its server's. It therefore
// answers with durations relative to the moment of the decision, never with
// absolute times, so that processes whose clocks disagree still share one
// exact budget.
package store

import (
	"context"
	"errors"
	"math"
	"time"
)

// Strategy is how a budget spreads requests over its timespan.
type Strategy string

const (
	// StrategyWindow allows at most Limit requests to be sent in any
	// rolling Timespan, exactly.
	StrategyWindow Strategy = "window"
	// StrategyLinear paces requests one every Timespan/Limit with a burst
	// allowance of Burst (the generic cell rate algorithm).
	StrategyLinear Strategy = "linear"
)

// Policy describes a budget. The zero Policy is not valid.
type Policy struct {
	Strategy Strategy
	// Limit is the number of requests per Timespan, at least 1.
	Limit int
	// Timespan is the period of the budget, positive.
	Timespan time.Duration
	// Burst is the burst allowance of StrategyLinear: 0 means 1.
	// StrategyWindow ignores it.
	Burst int
}

// NoMaxWait is a Request.MaxWait that accepts any wait.
const NoMaxWait = time.Duration(math.MaxInt64)

// Request asks for one slot.
type Request struct {
	// MaxWait is the longest acceptable wait; a request whose slot is
	// further away is refused and nothing is reserved. 0 admits only at
	// once; NoMaxWait accepts any wait.
	MaxWait time.Duration
	// Jitter is added to the slot of a request that has to wait, as drawn
	// by the caller (uniform in 0 … the configured jitter) before the
	// reservation is recorded, so the recorded instant is the send instant.
	// A request admitted at once never gets it, and it is cut short where
	// it would push the wait past MaxWait.
	Jitter time.Duration
	// Deferred asks for a reservation to confirm even when its slot is
	// now, for a request that may leave a little later (after waiting for
	// a seat): the Reservation then has an ID, its slot counts from now,
	// and Confirm (or Sender.Sent) records the send where it really
	// leaves. A strategy that never moves a late send (StrategyLinear)
	// ignores it: its at-once reservations have no ID.
	Deferred bool
}

// Reservation is the answer to a Request.
type Reservation struct {
	// OK reports that a slot was reserved. When false, Wait is how long the
	// request would have had to wait, and nothing was reserved.
	OK bool
	// Wait is the time from the decision to the slot; 0 means send now.
	Wait time.Duration
	// ID identifies a deferred reservation for Confirm and Release. It is 0
	// when OK is false, and when Wait is 0 unless Request.Deferred asked
	// for one.
	ID uint64
	// Cooldown reports that the budget was cooling down after a server's
	// throttling answer when the decision was made.
	Cooldown bool
}

// ErrUnknownReservation is returned by Confirm for a reservation that the
// store no longer holds: released, or dropped by the store.
var ErrUnknownReservation = errors.New("store: unknown reservation")

// Store keeps budgets, one per key. Implementations are safe for concurrent
// use; they never block on a lock while sleeping and return quickly (a
// shared store bounds every call with a short timeout).
type Store interface {
	// Reserve takes the earliest slot for one request on the budget key
	// under policy p: at once when the budget has room, otherwise the
	// earliest instant at which the request fits, after every reservation
	// already made (a released slot may be given to a newcomer).
	Reserve(ctx context.Context, key string, p Policy, r Request) (Reservation, error)
	// Confirm is called by a deferred request when its wait is over. It
	// returns the time still left until its slot: 0 to send now, more when
	// a cooldown moved the reservation later in the meantime.
	Confirm(ctx context.Context, key string, id uint64) (time.Duration, error)
	// Release gives back a deferred reservation that will not be used. The
	// slot goes to a later newcomer; reservations already queued keep
	// theirs. Releasing an unknown reservation does nothing.
	Release(ctx context.Context, key string, id uint64) error
	// SetCooldown makes the budget send nothing for d from now. A cooldown
	// only ever extends. Every outstanding reservation moves later by the
	// same amount, so that the earliest comes no sooner than the cooldown's
	// end; order and spacing are kept. It returns the cooldown left.
	SetCooldown(ctx context.Context, key string, p Policy, d time.Duration) (time.Duration, error)
	// Cooldown returns the cooldown left on the budget, 0 when none.
	Cooldown(ctx context.Context, key string) (time.Duration, error)
}

// Notifier is implemented by a store in which reservations can move
// without this process's doing: a cooldown set by another process, or the
// slots of a process that went away given to the waiters after them.
// Notify arranges for moved to be called whenever reservations of the
// budget key may have moved, so that its waiters confirm their slots again
// at once. moved must return quickly.
type Notifier interface {
	Notify(key string, moved func())
}

// SeatCut is a cut of a budget's concurrency limit that one process made
// after a throttling answer, shared with the other processes of the
// budget.
type SeatCut struct {
	// Limit is the budget's concurrency limit after the cut, for all the
	// processes sharing it together.
	Limit int
	// Ceiling is the limit growth stops at until ProbeAfter has passed:
	// below the seats that drew the throttle.
	Ceiling int
	// ProbeAfter is how long after the cut the limit may grow past Ceiling.
	ProbeAfter time.Duration
	// Rise marks a rise of the ceiling instead, a probe above it: the
	// other processes raise theirs to Ceiling (never lower it), so that
	// they grow together and their shares add up to the limit probed.
	Rise bool
}

// SeatSharer is implemented by a store whose budgets several processes
// share: they then share each budget's concurrency limit too, and hold no
// more seats together than it.
type SeatSharer interface {
	// SeatShare returns this process's share of limit, a budget's
	// concurrency limit for all the processes sharing it: limit divided
	// among the live processes last seen, the remainder going to the first
	// of them by name, so that the shares add up to limit, each at least
	// 1. It also returns the number of those processes: 0, with a share
	// of 0, until the store has counted them (a reservation on the budget
	// does). The share is 0 too for a moment after this process starts
	// sharing a budget that others use, while they give up their seats
	// over their new shares. The caller checks again a moment later.
	SeatShare(key string, limit int) (share, processes int)
	// ShareWait returns how long this process's share of the budget key
	// stays 0 after it started sharing a budget that others use (see
	// SeatShare); 0 when it does not wait so.
	ShareWait(key string) time.Duration
	// ShareCut tells the other processes of a cut this one made. It
	// returns at once; the message is sent in the background, at most
	// once.
	ShareCut(key string, cut SeatCut)
	// OnCut arranges for cut to be called with every cut another process
	// shares on the budget key, starting with the last one shared while
	// it is in force (its ProbeAfter, less the time since, has not
	// passed): a process that starts later learns the limit the others
	// share. cut must return quickly.
	OnCut(key string, cut func(SeatCut))
	// ReportSeats arranges for report to be called from time to time, for
	// the store to record the budget's concurrency limit and the seats this
	// process holds where status readers see them. report must return
	// quickly.
	ReportSeats(key string, report func() (limit, inUse int))
}
