package store

import "time"

// FailurePolicy is what a shared store does while its server cannot be
// reached or answers too slowly.
type FailurePolicy string

const (
	// FailureLocal falls back to an in-process budget with this process's
	// share of the limit: the limit divided by the number of processes last
	// seen sharing the budget.
	FailureLocal FailurePolicy = "local"
	// FailureOpen admits every request.
	FailureOpen FailurePolicy = "open"
	// FailureClosed fails every counted request with an error that wraps the
	// store's; the Redis store's error also implements errors.HasRetryAfter.
	FailureClosed FailurePolicy = "closed"
)

// EventType tells what a store Event reports.
type EventType string

const (
	// EventError is a failed store call.
	EventError EventType = "error"
	// EventDown is the start of an outage: the failure policy applies.
	EventDown EventType = "down"
	// EventUp is the end of an outage: the shared store is used again.
	EventUp EventType = "up"
	// EventFallback is a request decided by the failure policy instead of
	// the shared store.
	EventFallback EventType = "fallback"
)

// Event is something a shared store reports for metrics.
type Event struct {
	Type EventType
	// Policy is the failure policy in force (for EventDown and
	// EventFallback).
	Policy FailurePolicy
	// Err is the store's error (for EventError and EventDown).
	Err error
}

// BudgetStatus is the state of one budget in a shared store.
type BudgetStatus struct {
	Key      string
	Strategy Strategy
	Limit    int
	Timespan time.Duration
	// Used is the number of sends in the last timespan (window only).
	Used int
	// Waiting is the number of reservations still ahead.
	Waiting int
	// Processes is the number of processes sharing the budget.
	Processes int
	// Cooldown is the cooldown left.
	Cooldown time.Duration
	// SeatLimit is the budget's concurrency limit, for all its processes
	// together, as they last reported it (every presence interval); 0 when
	// none reports one.
	SeatLimit int
	// SeatsInUse is the seats the processes held when they last reported.
	SeatsInUse int
}

// Failover is implemented by a store whose budgets live on a server it can
// lose: while the server cannot be reached or answers too slowly, the
// store decides by its FailurePolicy and reports Events. Down reports
// whether it is in such an outage now.
type Failover interface {
	Down() bool
}

// Sender is implemented by a store whose calls cost a round trip to its
// server. Sent tells it that the request of reservation id, whose slot has
// come, leaves now: the store records the send at this instant in the
// background, as a Confirm now would, so that the request need not wait
// for the round trip. A request that reserved its slot (Request.Deferred)
// before waiting for a seat uses it, so that no seat is held across a
// round trip to the store. Should the send not fit the window at this
// instant after all (another process's cooldown or out-of-order sends
// came between), it is counted at the earliest instant it fits. Sent
// returns at once; an unknown id does nothing.
type Sender interface {
	Sent(key string, id uint64)
}
