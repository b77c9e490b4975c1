package k8sratelimit_test

// A chaos child (see redis_chaos_test.go): one process sending requests
// through a limiter on a shared Redis store until told to stop, timing
// what it does.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/childproc"
	"github.com/k8sratelimit/k8sratelimit/internal/decided"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// chaosEnv is a chaos child's name; set: run as a chaos child. Its other
// settings are childAPI, childWorkers and the KUBERNETES_RATELIMIT_*
// configuration.
const chaosEnv = "K8SRATELIMIT_TEST_CHAOS"

const (
	// storeTimeout is the Redis store's default call timeout, which the
	// children keep: the README's bound for every call.
	storeTimeout = 500 * time.Millisecond
	// callMargin is what a machine loaded with the race detector and a
	// full test run may add to a call that times out.
	callMargin = 400 * time.Millisecond
	// callBound is the longest any store call may take.
	callBound = storeTimeout + callMargin
	// slowCall is the duration from which a child reports a call.
	slowCall = 100 * time.Millisecond
	// retryAfterFailure is how long a worker waits after a failed request.
	retryAfterFailure = 10 * time.Millisecond
)

// runChaosChild sends requests from its workers through a limiter on a
// Redis store configured from the environment until its standard input
// ends, then closes the limiter and reports, one line each: every request
// ("req"), every decision span ("decided"), every store call slower than
// slowCall ("call"), every outage start and end ("event"), and the
// goroutines before and after ("goroutines"). It exits 2 when it cannot
// start.
func runChaosChild() int {
	before := runtime.NumGoroutine()
	cfg, err := k8sratelimit.LoadConfig(os.Environ())
	if err != nil {
		return childproc.Fail(err)
	}
	logger := childproc.Logger()
	var out childproc.Report
	rs, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{
		Failure: cfg.StoreFailure,
		Logger:  logger,
		OnEvent: func(e store.Event) {
			if e.Type == store.EventDown || e.Type == store.EventUp {
				out.Add("event %s %d", e.Type, time.Now().UnixNano())
			}
		},
	})
	if err != nil {
		return childproc.Fail(err)
	}
	var decisions decided.Recorder
	ts := timedStore{decidingStore: decidingStore{Store: rs, decisions: &decisions}, out: &out}
	lim, err := k8sratelimit.New(cfg, k8sratelimit.WithLogger(logger), k8sratelimit.WithStore(ts))
	if err != nil {
		return childproc.Fail(err)
	}
	// A transport of its own, so that its idle connections can be closed
	// before the goroutines are counted.
	tr := &http.Transport{MaxIdleConnsPerHost: 64} // as many as client-go keeps, so few requests wait for a dial
	rc := &rest.Config{Host: os.Getenv(childAPI), UserAgent: os.Getenv(chaosEnv), Transport: tr}
	// Below the limiter: when each counted request leaves the process.
	sends := &childproc.Sends{Match: func(r *http.Request) bool { return r.URL.Path == "/api/v1/namespaces" }}
	rc.Wrap(sends.Wrap)
	if err := lim.Configure(rc); err != nil {
		return childproc.Fail(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return childproc.Fail(err)
	}
	stop := childproc.Stopped()
	workers, _ := strconv.Atoi(os.Getenv(childWorkers))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			// Open the worker's connection first, without counting, so
			// that the server sees requests arrive when the budget lets
			// them go, not when a connection happens to be ready.
			_, _ = cs.Discovery().RESTClient().Get().AbsPath("/version").Do(k8sratelimit.WithoutLimit(context.Background())).Raw()
			for {
				select {
				case <-stop:
					return
				default:
				}
				from := time.Now()
				_, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
				to := time.Now()
				if err != nil {
					out.Add("req %d %d err %t %q", from.UnixNano(), to.UnixNano(), wrapsRedisError(err), err.Error())
					// Back off before trying again, as a controller's
					// work queue does, rather than spin on a refusal.
					time.Sleep(retryAfterFailure)
				} else {
					out.Add("req %d %d ok", from.UnixNano(), to.UnixNano())
				}
			}
		})
	}
	wg.Wait()
	if err := lim.Close(); err != nil {
		return childproc.Fail(err)
	}
	if err := rs.Close(); err != nil {
		return childproc.Fail(err)
	}
	tr.CloseIdleConnections()
	// Goroutines that were told to end take a moment to return: poll, for
	// a bounded time, until they are gone.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	after := runtime.NumGoroutine()
	if after > before {
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	}
	out.Decisions(decisions.Spans())
	out.Sends(sends.Times())
	out.Add("goroutines %d %d", before, after)
	out.Print()
	return 0
}

// wrapsRedisError reports whether err wraps the Redis store's refusal,
// which in turn wraps the error Redis's client returned: a network error,
// the end of a connection, or a deadline.
func wrapsRedisError(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if !strings.HasPrefix(e.Error(), "store: redis unavailable") {
			continue
		}
		inner := errors.Unwrap(e)
		var ne net.Error
		return inner != nil && (errors.As(inner, &ne) || errors.Is(inner, io.EOF) ||
			errors.Is(inner, syscall.ECONNREFUSED) || errors.Is(inner, syscall.ECONNRESET) ||
			errors.Is(inner, context.DeadlineExceeded) || errors.Is(inner, redis.ErrClosed))
	}
	return false
}

// timedStore is a chaos child's store: it records decisions as
// decidingStore does and reports every call slower than slowCall.
type timedStore struct {
	decidingStore
	out *childproc.Report
}

func (s timedStore) timed(kind string, from time.Time) {
	if to := time.Now(); to.Sub(from) >= slowCall {
		s.out.Add("call %s %d %d", kind, from.UnixNano(), to.UnixNano())
	}
}

func (s timedStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	defer s.timed("reserve", time.Now())
	return s.decidingStore.Reserve(ctx, key, p, r)
}

func (s timedStore) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	defer s.timed("confirm", time.Now())
	return s.decidingStore.Confirm(ctx, key, id)
}

func (s timedStore) Release(ctx context.Context, key string, id uint64) error {
	defer s.timed("release", time.Now())
	return s.decidingStore.Release(ctx, key, id)
}

func (s timedStore) SetCooldown(ctx context.Context, key string, p store.Policy, d time.Duration) (time.Duration, error) {
	defer s.timed("setcooldown", time.Now())
	return s.decidingStore.SetCooldown(ctx, key, p, d)
}

func (s timedStore) Cooldown(ctx context.Context, key string) (time.Duration, error) {
	defer s.timed("cooldown", time.Now())
	return s.decidingStore.Cooldown(ctx, key)
}
