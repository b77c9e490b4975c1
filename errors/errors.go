package errors

import (
	"errors"
	"time"
)

// ErrClosed is returned for every counted request made through a limiter
// after its Close method was called, and to every request that was waiting
// for a slot when Close was called. Match it with errors.Is.
var ErrClosed = errors.New("k8sratelimit: rate limiter is closed")

// HasRetryAfter is implemented by errors that know how long the caller
// should wait before trying again. *RateLimitExceededError implements it,
// and so does the error of a request the Redis store refused under the
// "closed" failure policy while Redis is down.
type HasRetryAfter interface {
	// RetryAfter returns how long to wait before trying again.
	RetryAfter() time.Duration
}
