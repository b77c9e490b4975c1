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

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// loadSpec is the load the workers put on an API server.
type loadSpec struct {
	workers  int
	duration time.Duration
	// call is one call by one worker; callOf, when set, is worker i's.
	call   func(ctx context.Context, cs kubernetes.Interface) error
	callOf func(i int) func(ctx context.Context, cs kubernetes.Interface) error
}

// listPods lists the pods of a namespace.
func listPods(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	return err
}

// stats counts what the workers and the limiter saw. It implements
// limiter.Observer. It is safe for concurrent use.
//
// Every call made ends as exactly one of: succeeded, rejected (a
// RateLimitExceededError for the maximum wait), cut off by the end of the
// run (its context ended, or its slot lay beyond the end), or failed
// otherwise.
type stats struct {
	calls, succeeded, failed atomic.Int64
	atOnce, deferred         atomic.Int64
	rejected                 atomic.Int64 // RateLimitExceededError for the maximum wait
	cutOff                   atomic.Int64 // ended by the end of the run
	inProgress               atomic.Int64 // calls in progress
	throttled                atomic.Int64 // 429s (and 503s with Retry-After) seen

	lastEnd atomic.Int64 // UnixNano when a call last ended, other than cut off

	mu    sync.Mutex
	waits []time.Duration // of deferred requests
	// byClass are the waits of the requests of each traffic class, those
	// admitted at once counting as 0, and how many were refused.
	byClass [limiter.NumClasses]struct {
		waits   []time.Duration
		refused int
	}
	slots []time.Time // instants waiting calls or workers wait for

	seats func() limiter.SeatStatus // the budget's seats; nil without k8sratelimit
}

// watchSeats makes st read the seats of the budget of rc's API server.
func (s *stats) watchSeats(l *k8sratelimit.Limiter, rc *rest.Config) {
	s.seats = func() limiter.SeatStatus {
		b, err := l.Budget("", rc)
		if err != nil || b == nil {
			return limiter.SeatStatus{}
		}
		return b.Seats()
	}
}

// seatStatus returns the budget's seats, the zero SeatStatus when none.
func (s *stats) seatStatus() limiter.SeatStatus {
	if s.seats == nil {
		return limiter.SeatStatus{}
	}
	return s.seats()
}

// finished returns the number of calls that have ended, one way or
// another.
func (s *stats) finished() int64 {
	return s.succeeded.Load() + s.failed.Load() + s.rejected.Load() + s.cutOff.Load()
}

// noteSlot records that a call or a worker waits for the budget until at.
func (s *stats) noteSlot(at time.Time) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots = slices.DeleteFunc(s.slots, func(t time.Time) bool { return !t.After(now) })
	s.slots = append(s.slots, at)
}

// nextSlot returns the earliest instant after now that something waits
// for, if any. Waits the store does not show (Redis) are not known.
func (s *stats) nextSlot(now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots = slices.DeleteFunc(s.slots, func(t time.Time) bool { return !t.After(now) })
	if len(s.slots) == 0 {
		return time.Time{}, false
	}
	return slices.MinFunc(s.slots, time.Time.Compare), true
}

func (s *stats) Admitted(_, _ string, c limiter.Class, wait time.Duration, _ limiter.WaitReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byClass[c].waits = append(s.byClass[c].waits, wait)
	if wait == 0 {
		s.atOnce.Add(1)
		return
	}
	s.deferred.Add(1)
	s.waits = append(s.waits, wait)
}

func (s *stats) Rejected(_, _ string, c limiter.Class, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byClass[c].refused++
}

// classWaitP99 returns the p99 wait of the requests of class c sent, and
// how many were sent and refused.
func (s *stats) classWaitP99(c limiter.Class) (p99 time.Duration, sent, refused int) {
	s.mu.Lock()
	waits := slices.Clone(s.byClass[c].waits)
	refused = s.byClass[c].refused
	s.mu.Unlock()
	if len(waits) == 0 {
		return 0, 0, refused
	}
	slices.Sort(waits)
	return waits[min(int(0.99*float64(len(waits))+0.5), len(waits))-1], len(waits), refused
}

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
// below the limiter a little later, after its goroutine gets a CPU. It
// also tells stats the slots deferred requests wait for.
type releaseRecorder struct {
	store.Store
	instants
	stats *stats
}

func (r *releaseRecorder) Reserve(ctx context.Context, key string, p store.Policy, req store.Request) (store.Reservation, error) {
	res, err := r.Store.Reserve(ctx, key, p, req)
	switch {
	case err != nil || !res.OK:
	case res.Wait == 0:
		r.record()
	case r.stats != nil:
		r.stats.noteSlot(time.Now().Add(res.Wait))
	}
	return res, err
}

func (r *releaseRecorder) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	left, err := r.Store.Confirm(ctx, key, id)
	switch {
	case err != nil:
	case left == 0:
		r.record()
	case r.stats != nil:
		r.stats.noteSlot(time.Now().Add(left)) // a cooldown moved it
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
// its own clientset (as separate controllers in one process have), for
// spec.duration, and reports progress to tick (the run's start and now)
// every interval and once at the end.
//
// At the end of the duration the workers start no new call, and the
// calls still in progress, waiting for the budget or for the server, are
// cancelled through their context: runLoad returns within moments of the
// duration. A worker whose call is refused with a RateLimitExceededError
// waits its RetryAfter (until the end at most) before its next call, as
// the README tells callers to.
func runLoad(ctx context.Context, rc *rest.Config, spec loadSpec, st *stats, tick func(start, now time.Time), interval time.Duration) error {
	clients := make([]kubernetes.Interface, spec.workers)
	for i := range clients {
		cs, err := kubernetes.NewForConfig(rest.CopyConfig(rc))
		if err != nil {
			return err
		}
		clients[i] = cs
	}
	start := time.Now()
	// Cancelled at the end rather than given a deadline: a limiter, ours
	// or client-go's, refuses at once a wait that would pass a deadline,
	// and the worker would only try again. Cancelled, it waits, and is cut
	// off at the end.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := time.AfterFunc(spec.duration, cancel)
	defer end.Stop()

	var wg sync.WaitGroup
	for i, cs := range clients {
		call := spec.call
		if spec.callOf != nil {
			call = spec.callOf(i)
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				st.calls.Add(1)
				st.inProgress.Add(1)
				err := call(ctx, cs)
				st.inProgress.Add(-1)
				st.count(ctx, err)
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
			tick(start, time.Now())
			return nil
		case <-ticker.C:
			tick(start, time.Now())
		}
	}
}

// count counts how a call made with ctx ended, and when the limiter
// refused it, waits until its slot or the end of ctx, whichever is first.
func (s *stats) count(ctx context.Context, err error) {
	if ctx.Err() == nil {
		s.lastEnd.Store(time.Now().UnixNano())
	}
	var rle *rlerrors.RateLimitExceededError
	switch {
	case err == nil:
		s.succeeded.Add(1)
	case errors.As(err, &rle):
		if rle.Err == nil {
			s.rejected.Add(1) // its slot was beyond the maximum wait
		} else {
			s.cutOff.Add(1) // its slot was beyond the end of the run
		}
		retry := rle.RetryAfter()
		s.noteSlot(time.Now().Add(retry))
		sleep(ctx, retry)
	case ctx.Err() != nil:
		s.cutOff.Add(1)
	default:
		s.failed.Add(1)
	}
}

// sleep returns after d, or sooner when ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
