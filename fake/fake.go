// Package fake provides a k8sratelimit.Limiter for unit tests, inside a
// Recorder: it waits for nothing and limits nothing, records the requests
// it sees per budget key (and the exempt ones apart), and can be scripted
// to refuse requests with a RateLimitExceededError, so that code's
// handling of it can be tested without waiting.
//
// It complements k8s.io/client-go/kubernetes/fake, not replaces it: a fake
// clientset has no transport, so nothing it does is counted. Use this
// package when the code under test builds real clients from a rest.Config
// (against an httptest server, say):
//
//	f := fake.New()
//	defer f.Install()() // the process default, for k8sratelimit.Configure
//	rc := &rest.Config{Host: srv.URL}
//	_ = k8sratelimit.Configure(rc)
//	... run the code under test with clients built from rc ...
//	f.Requests(f.Key(rc)) // how many requests it sent
package fake

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/cluster"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// Recorder holds a no-op *k8sratelimit.Limiter, records the requests its
// clients send and refuses them when scripted to. It is safe for
// concurrent use.
type Recorder struct {
	// Limiter is the *k8sratelimit.Limiter to configure clients with.
	*k8sratelimit.Limiter

	owner string
	rec   *tally
}

// New returns a Recorder whose limiter has owner "default". Its clients are
// configured like a real limiter's (Configure, ConfigureCluster,
// RateLimiter), but no request ever waits.
func New() *Recorder {
	rec := &tally{requests: make(map[string]int)}
	cfg := k8sratelimit.DefaultConfig()
	cfg.Adaptive = false
	// No max wait and no seats: nothing waits, and a scripted refusal
	// names no maximum wait the caller never set.
	cfg.MaxWait = nil
	cfg.Concurrency = k8sratelimit.ConcurrencyOff
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithStore(rec), k8sratelimit.WithObserver(rec))
	if err != nil {
		panic("fake: the default configuration is invalid: " + err.Error())
	}
	return &Recorder{Limiter: l, owner: cfg.Owner, rec: rec}
}

// Install makes f the process default limiter (k8sratelimit.SetDefault),
// and returns a function that forgets it again.
func (f *Recorder) Install() (restore func()) {
	k8sratelimit.SetDefault(f.Limiter)
	return func() { k8sratelimit.SetDefault(nil) }
}

// Key returns the budget key of the clients of rc, as Requests takes it.
func (f *Recorder) Key(rc *rest.Config) string {
	apiserver, err := cluster.APIServerFor(rc)
	if err != nil {
		return ""
	}
	return cluster.Key(f.owner, apiserver)
}

// Requests returns the number of counted requests seen on budget key,
// refused ones included.
func (f *Recorder) Requests(key string) int {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return f.rec.requests[key]
}

// Counts returns the number of counted requests per budget key.
func (f *Recorder) Counts() map[string]int {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	out := make(map[string]int, len(f.rec.requests))
	for k, v := range f.rec.requests {
		out[k] = v
	}
	return out
}

// Exempt returns the number of exempt requests seen (exec, attach,
// portforward, leases, WithoutLimit, extra exemptions), on any budget.
func (f *Recorder) Exempt() int {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	return f.rec.exempt
}

// RejectNext makes the next n counted requests fail with a
// RateLimitExceededError whose RetryAfter is retryAfter.
func (f *Recorder) RejectNext(n int, retryAfter time.Duration) {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	f.rec.rejectN, f.rec.rejectAll, f.rec.retryAfter = n, false, retryAfter
}

// RejectAll makes every counted request fail with a RateLimitExceededError
// whose RetryAfter is retryAfter, until Reset.
func (f *Recorder) RejectAll(retryAfter time.Duration) {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	f.rec.rejectN, f.rec.rejectAll, f.rec.retryAfter = 0, true, retryAfter
}

// Reset forgets the recorded requests and the scripted refusals.
func (f *Recorder) Reset() {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	f.rec.requests = make(map[string]int)
	f.rec.exempt, f.rec.rejectN, f.rec.rejectAll = 0, 0, false
}

// tally is both the fake's store, which admits everything at once unless
// scripted to refuse, and its observer, which counts exempt requests.
type tally struct {
	limiter.NopObserver

	mu         sync.Mutex
	requests   map[string]int
	exempt     int
	rejectN    int
	rejectAll  bool
	retryAfter time.Duration
}

func (r *tally) Reserve(_ context.Context, key string, _ store.Policy, _ store.Request) (store.Reservation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests[key]++
	if r.rejectAll || r.rejectN > 0 {
		if r.rejectN > 0 {
			r.rejectN--
		}
		return store.Reservation{Wait: r.retryAfter}, nil
	}
	return store.Reservation{OK: true}, nil
}

func (r *tally) Confirm(context.Context, string, uint64) (time.Duration, error) { return 0, nil }
func (r *tally) Release(context.Context, string, uint64) error                  { return nil }
func (r *tally) SetCooldown(context.Context, string, store.Policy, time.Duration) (time.Duration, error) {
	return 0, nil
}
func (r *tally) Cooldown(context.Context, string) (time.Duration, error) { return 0, nil }

func (r *tally) Exempt(string, string) { r.mu.Lock(); r.exempt++; r.mu.Unlock() }
