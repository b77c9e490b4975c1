package limiter

import "time"

// Observer is told of every decision a Limiter makes, for metrics and for
// tests. Its methods are called on the request's goroutine and must return
// quickly. Implementations must be safe for concurrent use.
type Observer interface {
	// Admitted reports a counted request that was sent after waiting wait
	// (0: admitted at once). cooldown reports that a server cooldown was
	// part of the wait.
	Admitted(cluster, key string, wait time.Duration, cooldown bool)
	// Rejected reports a counted request that failed with a
	// RateLimitExceededError telling it to retry after retryAfter.
	Rejected(cluster, key string, retryAfter time.Duration)
	// Exempt reports a request that passed without counting.
	Exempt(cluster, key string)
	// Throttled reports a server's throttling answer (429, or 503 with
	// Retry-After) and the cooldown it set (0 when Adaptive is off or the
	// response is a proxied backend's).
	Throttled(cluster, key string, code int, cooldown time.Duration)
}

type nopObserver struct{}

func (nopObserver) Admitted(string, string, time.Duration, bool) {}
func (nopObserver) Rejected(string, string, time.Duration)       {}
func (nopObserver) Exempt(string, string)                        {}
func (nopObserver) Throttled(string, string, int, time.Duration) {}
