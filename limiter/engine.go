// Package limiter is the budget engine: it asks a store.Store for slots,
// waits for them, gives up when waiting would exceed the maximum wait or
// the context's deadline, follows the server's throttling answers with a
// cooldown, and plugs into client-go as an http.RoundTripper (Transport)
// and as a flowcontrol.RateLimiter (RateLimiter).
//
// An Engine holds one Budget per API server (per budget key); every client
// of that server shares it. The root package k8sratelimit builds Engines
// from configuration; use this package directly to assemble one by hand.
package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/ctxopt"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// Options configures an Engine. The zero value of each field is its
// default.
type Options struct {
	// Policy is the budget of each API server. Required.
	Policy store.Policy
	// MaxWait caps how long a request waits for its slot: nil is no cap, 0
	// never waits. k8sratelimit.WithMaxWait overrides it per request.
	MaxWait *time.Duration
	// Jitter adds a uniform random 0 … Jitter to the slot of a deferred
	// request.
	Jitter time.Duration
	// Adaptive makes the Transport start a cooldown on a 429, or a 503 with
	// Retry-After.
	Adaptive bool
	// Clock is the clock of every timer and deadline. Default: the real
	// clock. It should be the clock the store reads.
	Clock clock.WithTicker
	// Logger receives the limiter's logs. Default: discard.
	Logger logr.Logger
	// Observer is told of every decision, for metrics and tests. Default:
	// none.
	Observer Observer
	// Exempt lists extra requests that never wait and consume nothing, on
	// top of streaming connections and leader-election leases.
	Exempt []func(*http.Request) bool
	// Concurrency limits each budget's requests in flight through a
	// Transport. Default: no limit.
	Concurrency Concurrency
	// Classes, when set, shares each budget's rate slots and seats among
	// the traffic classes of the requests that wait, by these weights (see
	// Class). Default: none; all requests wait in one line.
	Classes *Weights
}

// Engine shares budgets between clients. It is safe for concurrent use;
// the zero value is not usable: call New.
type Engine struct {
	store    store.Store
	sender   store.Sender // the store's, when its decisions cost a round trip
	own      *ownSends    // with a shared store, this process's own sends
	policy   store.Policy
	maxWait  *time.Duration
	jitter   time.Duration
	adaptive bool
	clock    clock.WithTicker
	log      logr.Logger
	observer Observer
	exempt   []func(*http.Request) bool

	concurrency Concurrency
	classes     *Weights // nil: one line

	budgets sync.Map // key -> *Budget

	mu      sync.Mutex // guards closed and the Add side of waiters
	closed  bool
	done    chan struct{} // closed by Close
	waiters sync.WaitGroup
}

// New returns an Engine that keeps its budgets in s.
func New(s store.Store, opts Options) *Engine {
	l := &Engine{
		store:    s,
		policy:   opts.Policy,
		maxWait:  opts.MaxWait,
		jitter:   opts.Jitter,
		adaptive: opts.Adaptive,
		clock:    opts.Clock,
		log:      opts.Logger,
		observer: opts.Observer,
		exempt:   opts.Exempt,
		done:     make(chan struct{}),

		concurrency: opts.Concurrency,
		classes:     opts.Classes,
	}
	l.sender, _ = s.(store.Sender)
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	l.own = newOwnSends(s, l.clock)
	if l.log.GetSink() == nil {
		l.log = logr.Discard()
	}
	if l.observer == nil {
		l.observer = NopObserver{}
	}
	return l
}

// Budget returns the budget of key, creating it named cluster (the name
// used in errors, logs and metrics). An existing budget keeps its name;
// SetCluster renames it.
func (l *Engine) Budget(key, cluster string) *Budget {
	if v, ok := l.budgets.Load(key); ok {
		return v.(*Budget)
	}
	v, loaded := l.budgets.LoadOrStore(key, newBudget(l, key, cluster))
	b := v.(*Budget)
	if loaded {
		return b
	}
	if n, ok := l.store.(store.Notifier); ok {
		n.Notify(key, b.wake)
	}
	if sh, ok := l.store.(store.SeatSharer); ok && b.seats != nil {
		sh.OnCut(key, func(cut store.SeatCut) { b.seats.adopt(cut, l.clock.Now()) })
		sh.ReportSeats(key, func() (int, int) { st := b.seats.status(); return st.Limit, st.InUse })
	}
	return b
}

// Policy returns the policy of the budgets.
func (l *Engine) Policy() store.Policy { return l.policy }

// Store returns the store the budgets live in.
func (l *Engine) Store() store.Store { return l.store }

// Close wakes every waiting request with errors.ErrClosed, releasing its
// reservation, and waits until they have all returned. After Close,
// counted requests fail at once with ErrClosed; exempt ones still pass.
// Close is idempotent and always returns nil.
func (l *Engine) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.waiters.Wait()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	l.waiters.Wait()
	return nil
}

// addWaiter registers a waiting request, or reports that the limiter is
// closed.
func (l *Engine) addWaiter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.waiters.Add(1)
	return true
}

func (l *Engine) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// drawJitter returns a uniform random duration in 0 … the jitter.
func (l *Engine) drawJitter() time.Duration {
	if l.jitter <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(l.jitter) + 1))
}

// maxWaitFor returns the maximum wait of a request made with ctx, and
// false when there is none.
func (l *Engine) maxWaitFor(ctx context.Context) (time.Duration, bool) {
	if d, unlimited, ok := ctxopt.MaxWait(ctx); ok {
		return d, !unlimited
	}
	if l.maxWait != nil {
		return *l.maxWait, true
	}
	return 0, false
}

// isExempt reports whether req never waits and consumes nothing.
func (l *Engine) isExempt(req *http.Request) bool {
	if ctxopt.Exempt(req.Context()) || isStreaming(req) || isLease(req) {
		return true
	}
	for _, f := range l.exempt {
		if f(req) {
			return true
		}
	}
	return false
}

var (
	errClosed  = rlerrors.ErrClosed
	errStopped = fmt.Errorf("k8sratelimit: rate limiter stopped: %w", rlerrors.ErrClosed)
)

// Budgets returns the budgets made so far.
func (l *Engine) Budgets() []*Budget {
	var out []*Budget
	l.budgets.Range(func(_, v any) bool {
		out = append(out, v.(*Budget))
		return true
	})
	return out
}
