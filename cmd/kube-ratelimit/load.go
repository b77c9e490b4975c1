package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// loadSpec is the load the workers put on an API server.
type loadSpec struct {
	workers  int
	duration time.Duration
	// call is one read-only call by one worker.
	call func(ctx context.Context, cs kubernetes.Interface) error
}

// listPods is the demo's call.
func listPods(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	return err
}

// stats counts what the workers and the limiter saw. It implements
// limiter.Observer. It is safe for concurrent use.
type stats struct {
	calls, succeeded, failed atomic.Int64
	atOnce, deferred         atomic.Int64
	rejected                 atomic.Int64 // RateLimitExceededError
	waiting                  atomic.Int64 // calls in progress
	throttled                atomic.Int64 // 429s (and 503s with Retry-After) seen

	mu    sync.Mutex
	waits []time.Duration // of deferred requests
}

func (s *stats) Admitted(_, _ string, wait time.Duration, _ limiter.WaitReason) {
	if wait == 0 {
		s.atOnce.Add(1)
		return
	}
	s.deferred.Add(1)
	s.mu.Lock()
	s.waits = append(s.waits, wait)
	s.mu.Unlock()
}
func (s *stats) Rejected(string, string, time.Duration)       {}
func (s *stats) Exempt(string, string)                        {}
func (s *stats) Throttled(string, string, int, time.Duration) { s.throttled.Add(1) }

// sendRecorder records the instant each request leaves for the server. It
// is the innermost transport, so it sees requests after every client-side
// limiter has let them go.
type sendRecorder struct {
	next http.RoundTripper
	instants
}

func (r *sendRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.record()
	return r.next.RoundTrip(req)
}

// instants is a list of instants, recorded as they come. It is safe for
// concurrent use.
type instants struct {
	mu sync.Mutex
	at []time.Time
}

func (r *instants) record() {
	now := time.Now()
	r.mu.Lock()
	r.at = append(r.at, now)
	r.mu.Unlock()
}

// releaseRecorder is a store that records the instant it lets each request
// go: at once, or when a deferred request confirms its slot. These are the
// instants the window budget holds on; a request reaches the transport
// below the limiter a little later, after its goroutine gets a CPU.
type releaseRecorder struct {
	store.Store
	instants
}

func (r *releaseRecorder) Reserve(ctx context.Context, key string, p store.Policy, req store.Request) (store.Reservation, error) {
	res, err := r.Store.Reserve(ctx, key, p, req)
	if err == nil && res.OK && res.Wait == 0 {
		r.record()
	}
	return res, err
}

func (r *releaseRecorder) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	left, err := r.Store.Confirm(ctx, key, id)
	if err == nil && left == 0 {
		r.record()
	}
	return left, err
}

func (r *sendRecorder) WrappedRoundTripper() http.RoundTripper { return r.next }

// mostInWindow returns the most instants within any rolling span.
func (r *instants) mostInWindow(span time.Duration) int {
	r.mu.Lock()
	at := slices.Clone(r.at)
	r.mu.Unlock()
	slices.SortFunc(at, time.Time.Compare)
	return apisim.MostInWindow(at, span)
}

// waitQuantiles returns the p50, p99 and largest wait of every counted
// request, those admitted at once counting as 0.
func (s *stats) waitQuantiles() (p50, p99, maxWait time.Duration) {
	s.mu.Lock()
	waits := slices.Clone(s.waits)
	s.mu.Unlock()
	n := int(s.atOnce.Load()) + len(waits)
	if n == 0 {
		return 0, 0, 0
	}
	slices.Sort(waits)
	at := func(q float64) time.Duration {
		i := int(q*float64(n)+0.5) - 1 // rank among all, 0-based
		if i -= n - len(waits); i < 0 {
			return 0
		}
		return waits[min(i, len(waits)-1)]
	}
	if len(waits) > 0 {
		maxWait = waits[len(waits)-1]
	}
	return at(0.50), at(0.99), maxWait
}

// runLoad runs spec against the clients built from rc, each worker with
// its own clientset (as separate controllers in one process have), until
// the duration is over, and reports progress to tick every interval.
func runLoad(ctx context.Context, rc *rest.Config, spec loadSpec, st *stats, tick func(elapsed time.Duration), interval time.Duration) error {
	clients := make([]kubernetes.Interface, spec.workers)
	for i := range clients {
		cs, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
		if err != nil {
			return err
		}
		clients[i] = cs
	}
	start := time.Now()
	deadline := start.Add(spec.duration)
	// In-flight calls may finish after the deadline, but not much later.
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(10*time.Second))
	defer cancel()

	var wg sync.WaitGroup
	for _, cs := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				st.calls.Add(1)
				st.waiting.Add(1)
				err := spec.call(ctx, cs)
				st.waiting.Add(-1)
				switch {
				case err == nil:
					st.succeeded.Add(1)
				case errors.As(err, new(*rlerrors.RateLimitExceededError)):
					st.rejected.Add(1)
					st.failed.Add(1)
				default:
					st.failed.Add(1)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			tick(time.Since(start))
			return nil
		case <-ticker.C:
			tick(time.Since(start))
		}
	}
}
