package k8sratelimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/k8sratelimit/k8sratelimit/cluster"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/ctxopt"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// Limiter gives the clients configured with it one budget per API server.
// It is safe for concurrent use. Make one with New; the process default is
// built from the environment by Configure and Default.
type Limiter struct {
	cfg    Config
	engine *limiter.Engine // nil when disabled

	store      io.Closer // the store New made, if it must be closed
	closeStore sync.Once

	// configured holds the rest.Configs Configure has wrapped, weakly, so
	// that configuring one twice wraps it once even when a wrapper that
	// hides what it wraps was added in between.
	configured sync.Map // weak.Pointer[rest.Config] -> struct{}
}

// Option configures New.
type Option func(*options)

type options struct {
	store     store.Store
	clock     clock.WithTicker
	logger    logr.Logger
	observers observers
	metrics   prometheus.Registerer
	exempt    []func(*http.Request) bool
}

// WithStore keeps the budgets in s instead of a new in-memory store.
func WithStore(s store.Store) Option { return func(o *options) { o.store = s } }

// WithClock makes every timer, deadline and (for the in-memory store)
// every admission decision read c. Tests pass a fake clock.
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }

// WithLogger sends the limiter's logs to log: long waits (at most once a
// second per budget) and, with the Redis store, a store that cannot be
// used and its recovery (once each). Without it, the limiter logs through
// klog (k8s.io/klog/v2), as client-go does.
func WithLogger(log logr.Logger) Option { return func(o *options) { o.logger = log } }

// WithObserver tells o of every decision (see limiter.Observer). It may be
// given more than once.
func WithObserver(o limiter.Observer) Option {
	return func(opts *options) { opts.observers = append(opts.observers, o) }
}

// WithExemption exempts the requests f matches: they never wait and
// consume nothing. Streaming connections (exec, attach, portforward) and
// coordination.k8s.io leases are always exempt.
func WithExemption(f func(*http.Request) bool) Option {
	return func(o *options) { o.exempt = append(o.exempt, f) }
}

// New returns a Limiter for cfg, which must be valid. A disabled cfg gives
// a Limiter whose Configure leaves every rest.Config untouched.
func New(cfg Config, opts ...Option) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return &Limiter{cfg: cfg}, nil
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o.defaults()
	var m *metrics
	if o.metrics != nil {
		m = newMetrics()
		o.observers = append(o.observers, m)
	}
	var owned io.Closer // a store New made, closed by Close
	if o.store == nil {
		s, err := newStore(cfg, o, m)
		if err != nil {
			return nil, err
		}
		o.store = s
		owned, _ = s.(io.Closer)
	}
	engine := limiter.New(o.store, limiter.Options{
		Policy:   cfg.policy(),
		MaxWait:  cfg.MaxWait,
		Jitter:   cfg.Jitter,
		Adaptive: cfg.Adaptive,
		Clock:    o.clock,
		Logger:   o.logger,
		Observer: o.observer(),
		Exempt:   o.exempt,

		Concurrency: cfg.concurrency(),
		Classes:     cfg.weights(),
	})
	if m != nil {
		if err := m.register(o.metrics, engine); err != nil {
			if owned != nil {
				_ = owned.Close()
			}
			return nil, fmt.Errorf("k8sratelimit: registering metrics: %w", err)
		}
	}
	return &Limiter{cfg: cfg, engine: engine, store: owned}, nil
}

// defaults fills in what the options left unset: the real clock, and
// klog's logger, as client-go logs.
func (o *options) defaults() {
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	if o.logger.GetSink() == nil {
		o.logger = klog.Background()
	}
}

// observer returns the observers given, as one.
func (o *options) observer() limiter.Observer {
	switch len(o.observers) {
	case 0:
		return nil
	case 1:
		return o.observers[0]
	default:
		return o.observers
	}
}

// newStore makes the store cfg names: in memory, or Redis from its URL.
func newStore(cfg Config, o options, m *metrics) (store.Store, error) {
	if cfg.Store != StoreRedis {
		return memorystore.New(o.clock), nil
	}
	opts := redisstore.Options{Failure: cfg.StoreFailure, Logger: o.logger}
	if m != nil {
		opts.OnEvent = m.storeEvent
	}
	s, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), opts)
	if err != nil {
		return nil, &rlerrors.InvalidConfigurationError{Key: EnvRedisURL, Value: cfg.RedisURL.String(), Reason: redisErrorReason(err)}
	}
	return s, nil
}

// policy returns the store policy of the configuration.
func (c Config) policy() store.Policy {
	return store.Policy{Strategy: c.Strategy, Limit: c.Limit, Timespan: c.Timespan, Burst: c.Burst}
}

// Config returns the configuration the Limiter was made with.
func (l *Limiter) Config() Config { return l.cfg }

// Enabled reports whether the Limiter limits anything.
func (l *Limiter) Enabled() bool { return l.engine != nil }

// Configure makes every client built from rc count against the budget of
// its API server; the cluster is named by its normalised API server in
// errors, logs and metrics. See ConfigureCluster.
func (l *Limiter) Configure(rc *rest.Config) error {
	return l.ConfigureCluster("", rc)
}

// ConfigureCluster is Configure with a registered cluster name, used in
// errors, logs and metrics instead of the API server.
//
// It adds the limiter's transport with rc.Wrap, after any WrapTransport
// already there. When the caller left both rc.QPS and rc.RateLimiter unset,
// it sets rc.QPS to -1, so that client-go's default limiter (5 QPS per
// client) does not throttle on top; a QPS or RateLimiter the caller chose
// is left alone, except this package's own RateLimiter, which is refused
// (the same requests would count twice). Configuring one rc twice counts
// each request once; so does configuring a copy of a configured rc, unless
// a wrapper that hides what it wraps (no WrappedRoundTripper) was added in
// between. A disabled Limiter leaves rc untouched.
func (l *Limiter) ConfigureCluster(name string, rc *rest.Config) error {
	if rc == nil {
		return errors.New("k8sratelimit: nil rest.Config")
	}
	if l.engine == nil {
		return nil
	}
	if _, ok := rc.RateLimiter.(*limiter.RateLimiter); ok {
		return errors.New("k8sratelimit: rest.Config.RateLimiter is already a k8sratelimit RateLimiter: with Configure too, every request would count twice")
	}
	b, err := l.budgetFor(name, rc)
	if err != nil {
		return err
	}
	wp := weak.Make(rc)
	if _, again := l.configured.LoadOrStore(wp, struct{}{}); again {
		return nil
	}
	runtime.AddCleanup(rc, func(wp weak.Pointer[rest.Config]) { l.configured.Delete(wp) }, wp)
	engine := l.engine
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		if wrapsEngine(rt, engine) {
			return rt
		}
		return b.Wrap(rt)
	})
	if rc.QPS == 0 && rc.RateLimiter == nil {
		rc.QPS = -1
	}
	return nil
}

// RateLimiter returns a flowcontrol.RateLimiter on the budget of rc's API
// server, for callers that can only take one. It sees no requests or
// responses: it cannot exempt leases or follow a server's 429s, so prefer
// Configure, and never use it for leader election. A disabled Limiter
// returns a limiter that admits everything.
func (l *Limiter) RateLimiter(rc *rest.Config) (flowcontrol.RateLimiter, error) {
	if rc == nil {
		return nil, errors.New("k8sratelimit: nil rest.Config")
	}
	if l.engine == nil {
		return flowcontrol.NewFakeAlwaysRateLimiter(), nil
	}
	b, err := l.budgetFor("", rc)
	if err != nil {
		return nil, err
	}
	return b.RateLimiter(), nil
}

// Budget returns the budget of rc's API server, registering name for it
// when name is not empty. It returns nil for a disabled Limiter.
func (l *Limiter) Budget(name string, rc *rest.Config) (*limiter.Budget, error) {
	if l.engine == nil {
		return nil, nil
	}
	return l.budgetFor(name, rc)
}

// budgetFor returns the budget of rc's API server. A new budget is named
// by name, else by the API server; a non-empty name renames an existing
// one, an empty one keeps its name.
func (l *Limiter) budgetFor(name string, rc *rest.Config) (*limiter.Budget, error) {
	apiserver, err := cluster.APIServerFor(rc)
	if err != nil {
		return nil, fmt.Errorf("k8sratelimit: %w", err)
	}
	if name == "" {
		return l.engine.Budget(cluster.Key(l.cfg.Owner, apiserver), apiserver), nil
	}
	b := l.engine.Budget(cluster.Key(l.cfg.Owner, apiserver), name)
	b.SetCluster(name)
	return b, nil
}

// Close wakes every waiting request with errors.ErrClosed and releases its
// reservation. After Close, counted requests fail at once with ErrClosed
// and exempt ones still pass. It is idempotent.
func (l *Limiter) Close() error {
	if l.engine == nil {
		return nil
	}
	err := l.engine.Close()
	if l.store != nil {
		l.closeStore.Do(func() { err = errors.Join(err, l.store.Close()) })
	}
	return err
}

// wrapsEngine reports whether rt, or a transport it wraps, is a Transport
// of engine.
func wrapsEngine(rt http.RoundTripper, engine *limiter.Engine) bool {
	for rt != nil {
		if t, ok := rt.(*limiter.Transport); ok && t.Budget().Engine() == engine {
			return true
		}
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok {
			return false
		}
		rt = w.WrappedRoundTripper()
	}
	return false
}

// WithMaxWait returns a context whose Kubernetes requests wait at most d
// for their slot (0: never), whatever the configured maximum wait.
func WithMaxWait(ctx context.Context, d time.Duration) context.Context {
	return ctxopt.WithMaxWait(ctx, d)
}

// WithoutLimit returns a context whose Kubernetes requests are exempt:
// they never wait and consume nothing.
func WithoutLimit(ctx context.Context) context.Context {
	return ctxopt.WithoutLimit(ctx)
}
