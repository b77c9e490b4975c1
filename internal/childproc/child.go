package childproc

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/k8sratelimit/k8sratelimit/internal/harness"
)

// CannotStart is the exit code of a child that could not start its work.
const CannotStart = 2

// Main runs child and exits with the code it returns when this process was
// started as a child in mode; otherwise it returns. TestMain calls it for
// each mode before running the tests.
func Main(mode string, child func() int) {
	if os.Getenv(mode) != "" {
		os.Exit(child())
	}
}

// Fail prints err on standard error for the parent to show and returns
// CannotStart.
func Fail(err error) int {
	fmt.Fprintln(os.Stderr, "child:", err)
	return CannotStart
}

// Logger returns a logger that writes to standard error, where the parent
// collects it with the child's report.
func Logger() logr.Logger {
	return funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
}

// Stopped returns a channel that is closed when the parent tells the child
// to stop (Process.Stop): when the child's standard input ends. It starts
// a goroutine that reads standard input until then.
func Stopped() <-chan struct{} {
	stop := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }()
	return stop
}

// Sends records when a child's requests leave it: Wrap goes below the
// limiter, so that it sees a request at the instant the limiter lets it go.
// It is safe for concurrent use.
type Sends struct {
	// Match selects the requests to record; nil records every one.
	Match func(*http.Request) bool

	mu sync.Mutex
	at []time.Time
}

// Wrap returns rt, recording each matching request as it goes through; it
// fits rest.Config's Wrap.
func (s *Sends) Wrap(rt http.RoundTripper) http.RoundTripper {
	return harness.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		if s.Match == nil || s.Match(r) {
			s.mu.Lock()
			s.at = append(s.at, time.Now())
			s.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

// Times returns when the recorded requests left, in the order they did.
func (s *Sends) Times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}
