package limiter

import "time"

// Observer is told of every decision an Engine makes, for metrics and for
// tests. Its methods are called on the request's goroutine and must return
// quickly. Implementations must be safe for concurrent use.
type Observer interface {
	// Admitted reports a counted request of class c that was sent after
	// waiting wait (0: admitted at once) for reason.
	Admitted(cluster, key string, c Class, wait time.Duration, reason WaitReason)
	// Rejected reports a counted request of class c that failed with a
	// RateLimitExceededError telling it to retry after retryAfter.
	Rejected(cluster, key string, c Class, retryAfter time.Duration)
	// Exempt reports a request that passed without counting.
	Exempt(cluster, key string)
	// Throttled reports a server's throttling answer (429, or 503 with
	// Retry-After) and the cooldown it set (0 when Adaptive is off or the
	// response is a proxied backend's).
	Throttled(cluster, key string, code int, cooldown time.Duration)
}

// WaitReason says what a request waited for.
type WaitReason uint8

const (
	// WaitNone: the request was admitted at once.
	WaitNone WaitReason = iota
	// WaitBudget: it waited for its slot in the rate budget.
	WaitBudget
	// WaitSeat: it waited mostly for a seat (the concurrency limit).
	WaitSeat
	// WaitCooldown: a server cooldown was part of its wait.
	WaitCooldown
)

// String returns how logs name the reason.
func (r WaitReason) String() string {
	switch r {
	case WaitBudget:
		return "client-side budget"
	case WaitSeat:
		return "concurrency limit"
	case WaitCooldown:
		return "server cooldown"
	default:
		return "none"
	}
}

// NopObserver is an Observer that does nothing: embed it to implement only
// some of the methods.
type NopObserver struct{}

func (NopObserver) Admitted(string, string, Class, time.Duration, WaitReason) {}
func (NopObserver) Rejected(string, string, Class, time.Duration)             {}
func (NopObserver) Exempt(string, string)                                     {}
func (NopObserver) Throttled(string, string, int, time.Duration)              {}
