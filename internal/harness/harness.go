// Package harness is the test harness that the module's test packages
// share, so that none declares its own copy: a function used as an
// http.RoundTripper, calls run on their own goroutine whose results a test
// awaits or requires to be still pending, a wait for state other goroutines
// reach, the RateLimitExceededError in an error, and an Observer that
// records what a limiter decided.
package harness

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// RoundTripFunc is a function used as an http.RoundTripper.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// resultTimeout is how long Result waits for a call to return.
const resultTimeout = 10 * time.Second

// Async runs f on its own goroutine and returns the channel its result
// arrives on.
func Async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// Result returns the result of a call started by Async, failing t when it
// has not returned within 10 seconds.
func Result(t testing.TB, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(resultTimeout):
		require.FailNow(t, "the call did not return")
		return nil
	}
}

// Pending fails t when the call started by Async has returned already.
func Pending(t testing.TB, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		require.FailNow(t, "the call returned", "error: %v", err)
	default:
	}
}

// Settle waits until cond holds, polling every millisecond for up to 5
// seconds, and fails t with the message msg formatted with args when it
// does not. It is for state that other goroutines reach without a clock
// moving.
func Settle(t testing.TB, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, fmt.Sprintf(msg, args...))
}

// RateLimitExceeded returns the RateLimitExceededError in err, failing t
// when there is none.
func RateLimitExceeded(t testing.TB, err error) *rlerrors.RateLimitExceededError {
	t.Helper()
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	return rle
}
