// Package harness is the test harness that the module's test packages
// share, so that none declares its own copy: a function used as an
// http.RoundTripper, and calls run on their own goroutine whose results a
// test awaits or requires to be still pending.
package harness

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
