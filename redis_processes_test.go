package k8sratelimit_test

// These tests run several OS processes - this test binary, re-executed in
// child mode - that share one budget through a real redis-server, each
// sending requests with its own client-go clientset to one simulated API
// server, which records when every request arrives. Each child also times
// the store calls in which its requests were let go, on the wall clock the
// processes share, so that the window is checked on the decisions
// themselves (package decided), not on sends that come a scheduling delay
// after them.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/childproc"
	"github.com/k8sratelimit/k8sratelimit/internal/decided"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// The child's settings, besides the KUBERNETES_RATELIMIT_* configuration.
const (
	childEnv      = "K8SRATELIMIT_TEST_CHILD" // its name; set: run as a child
	childAPI      = "K8SRATELIMIT_TEST_API"
	childRequests = "K8SRATELIMIT_TEST_REQUESTS"
	childWorkers  = "K8SRATELIMIT_TEST_WORKERS"
	childSkew     = "K8SRATELIMIT_TEST_SKEW" // how far its clock is off
)

func TestMain(m *testing.M) {
	childproc.Main(childEnv, runChild)
	childproc.Main(chaosEnv, runChaosChild)
	os.Exit(m.Run())
}

// skewedClock is the real clock, off by a fixed amount.
type skewedClock struct {
	clock.RealClock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// runChild sends the requests it is told to through a limiter configured
// from the environment and reports when each left ("at"), when its store
// let each go ("decided") and how many were sent and failed; it exits 2
// when it cannot start.
func runChild() int {
	cfg, err := k8sratelimit.LoadConfig(os.Environ())
	if err != nil {
		return childproc.Fail(err)
	}
	skew, _ := time.ParseDuration(os.Getenv(childSkew))
	logger := childproc.Logger()
	// The store New would make from cfg, made here to time its decisions.
	rs, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{Failure: cfg.StoreFailure, Logger: logger})
	if err != nil {
		return childproc.Fail(err)
	}
	defer rs.Close()
	var decisions decided.Recorder
	lim, err := k8sratelimit.New(cfg, k8sratelimit.WithClock(skewedClock{skew: skew}), k8sratelimit.WithLogger(logger),
		k8sratelimit.WithStore(decidingStore{Store: rs, decisions: &decisions}))
	if err != nil {
		return childproc.Fail(err)
	}
	defer lim.Close()
	rc := &rest.Config{Host: os.Getenv(childAPI), UserAgent: os.Getenv(childEnv)}
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
	n, _ := strconv.Atoi(os.Getenv(childRequests))
	workers, _ := strconv.Atoi(os.Getenv(childWorkers))
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	var sent sync.WaitGroup
	var mu sync.Mutex
	nsent, nfailed := 0, 0
	// Each worker opens its connection first, without counting, so that
	// the server sees requests leave when the budget lets them, not when
	// a connection happens to be ready.
	var ready sync.WaitGroup
	ready.Add(workers)
	for range workers {
		sent.Go(func() {
			_, _ = cs.Discovery().RESTClient().Get().AbsPath("/version").Do(k8sratelimit.WithoutLimit(context.Background())).Raw()
			ready.Done()
			ready.Wait()
			for range jobs {
				_, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
				mu.Lock()
				if err != nil {
					nfailed++
					fmt.Fprintln(os.Stderr, "child:", err)
				} else {
					nsent++
				}
				mu.Unlock()
			}
		})
	}
	sent.Wait()
	var report childproc.Report
	report.Sends(sends.Times())
	report.Decisions(decisions.Spans())
	report.Result(nsent, nfailed)
	report.Print()
	return 0
}

// decidingStore is a child's Redis store, recording the span of every call
// in which it let a request go: a Reserve with no wait (unless kept to be
// confirmed, for a request that waits for a seat), a Confirm with none
// left, a Sent (the instant the store records). It embeds the store itself, so that the limiter still finds the
// store's optional interfaces (store.Notifier, store.SeatSharer).
type decidingStore struct {
	*redisstore.Store
	decisions *decided.Recorder
}

func (s decidingStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	from := time.Now()
	res, err := s.Store.Reserve(ctx, key, p, r)
	if err == nil && res.OK && res.Wait == 0 && res.ID == 0 {
		s.decisions.Add(from, time.Now())
	}
	return res, err
}

func (s decidingStore) Sent(key string, id uint64) {
	at := time.Now()
	s.decisions.Add(at, at)
	s.Store.Sent(key, id)
}

func (s decidingStore) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	from := time.Now()
	left, err := s.Store.Confirm(ctx, key, id)
	if err == nil && left == 0 {
		s.decisions.Add(from, time.Now())
	}
	return left, err
}

// child is one child process and, once it ended, its report.
type child struct {
	*childproc.Process
	sends     []time.Time    // when its counted requests left it
	decisions []decided.Span // when the store let them go
}

// sharedEnv is the configuration every child shares.
func sharedEnv(redisURL string, limit int, timespan string) []string {
	return append([]string{
		"KUBERNETES_RATELIMIT=" + strconv.Itoa(limit),
		"KUBERNETES_RATELIMIT_TIMESPAN=" + timespan,
	}, childproc.RedisBudget(redisURL, "process-test")...)
}

// runChildren starts a child per name of skews, each with its clock off
// by its skew, sending requests requests from workers goroutines to api,
// waits for them all and returns them and how many requests they sent.
func runChildren(t *testing.T, api *apisim.Server, env []string, skews map[string]time.Duration, requests, workers int) ([]*child, int) {
	t.Helper()
	var children []*child
	for name, skew := range skews {
		children = append(children, startChild(t, name, api.URL, env, requests, workers, skew))
	}
	total := 0
	for _, c := range children {
		total += c.wait(t)
	}
	return children, total
}

// startChild starts a child process named name that sends requests
// requests from workers goroutines, its clock off by skew.
func startChild(t *testing.T, name, api string, env []string, requests, workers int, skew time.Duration) *child {
	t.Helper()
	env = append(env, childAPI+"="+api,
		childRequests+"="+strconv.Itoa(requests), childWorkers+"="+strconv.Itoa(workers),
		childSkew+"="+skew.String())
	return &child{Process: childproc.Start(t, childEnv, name, env...)}
}

// wait waits for the child to end and returns how many requests it sent.
func (c *child) wait(t *testing.T) int {
	t.Helper()
	r := childproc.Parse(c.Wait(t))
	if !r.Finished {
		t.Fatalf("child %s printed no result: %s", c.Name, c.Output())
	}
	c.sends, c.decisions = r.Sends, r.Decisions
	logs := strings.Join(r.Other, "\n")
	assert.Zero(t, r.Failed, "child %s: %s", c.Name, logs)
	if len(r.Other) > 0 {
		t.Logf("child %s:\n%s", c.Name, logs)
	}
	return r.Sent
}

// arrivalsAt returns when each list request reached the server.
func arrivalsAt(api *apisim.Server) []time.Time {
	all, _ := arrivals(api)
	return all
}

// arrivals returns when each list request reached the server, by child.
func arrivals(api *apisim.Server) (all []time.Time, by map[string][]time.Time) {
	by = map[string][]time.Time{}
	for _, r := range api.Requests() {
		if r.Path != "/api/v1/namespaces" {
			continue
		}
		all = append(all, r.At)
		ua := r.Header.Get("User-Agent")
		by[ua] = append(by[ua], r.At)
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	return all, by
}

// windowHolds checks that no limit+1 of the children's requests were let
// go within less than timespan: no group of limit+1 of their decision
// spans lies within less (package decided). Its only slack is the width of
// those spans, a Redis round trip or so.
func windowHolds(t *testing.T, children []*child, limit int, timespan time.Duration) {
	t.Helper()
	var all []decided.Span
	for _, c := range children {
		all = append(all, c.decisions...)
	}
	crowd, ok := decided.Tightest(all, limit+1)
	if !assert.True(t, ok, "more than %d decisions", limit) {
		return
	}
	assert.GreaterOrEqual(t, crowd.Within, timespan,
		"the processes together let %d requests go within %v: %v", limit+1, timespan, crowd)
	t.Logf("the closest %d decisions lie surely within %v, the widest of their spans %v", limit+1, crowd.Within, crowd.Widest())
}

// decisionCount returns how many requests the children's stores let go.
func decisionCount(children ...*child) int {
	n := 0
	for _, c := range children {
		n += len(c.decisions)
	}
	return n
}

func TestRedisProcessesShareOneExactBudget(t *testing.T) {
	srv := redistest.Start(t)
	api := apisim.New()
	t.Cleanup(api.Close)
	const limit, requests, workers = 20, 30, 15
	env := sharedEnv(srv.URL(), limit, "second")
	// Three processes, two of them with clocks seconds off: the budget is
	// decided on the Redis server's clock alone.
	skews := map[string]time.Duration{"a": 0, "b": 7 * time.Second, "c": -5 * time.Second}
	children, total := runChildren(t, api, env, skews, requests, workers)
	require.Equal(t, requests*len(skews), total, "every request is served")

	var all []time.Time
	by := map[string][]time.Time{}
	for _, c := range children {
		all = append(all, c.sends...)
		by[c.Name] = c.sends
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	require.Len(t, all, total)
	require.Len(t, arrivalsAt(api), total, "the server saw every request")
	require.Equal(t, total, decisionCount(children...), "one decision a request")
	windowHolds(t, children, limit, time.Second)
	wireHolds(t, "at the server", arrivalsAt(api), limit, time.Second)

	// All the demand waits from the start, so the budget is used to the
	// full: exactly, the last request leaves (total/limit - 1) timespans
	// after the first. Allow 5%.
	elapsed := all[len(all)-1].Sub(all[0])
	ideal := time.Duration((total+limit-1)/limit-1) * time.Second
	// A waiter that wakes late sends late, and the window holds on the
	// instants requests leave, so lateness costs a little of the budget
	// each timespan: more under the race detector.
	use := 0.95
	if harness.Race {
		use = 0.90
	}
	assert.LessOrEqual(t, elapsed, time.Duration(float64(ideal)/use),
		"with demand waiting, at least %.0f%% of the budget is used", use*100)
	t.Logf("%d processes sent %d requests in %v (exactly: %v); most in any second: %d; per process: %v",
		len(skews), total, elapsed.Round(time.Millisecond), ideal, apisim.MostInWindow(all, time.Second), spans(by, all[0]))
}

// TestRedisProcessesShareASmallBudget: two processes share 3 requests a
// second, where one request late or early is a third of the budget: at
// the server, no rolling second holds more than 3.
func TestRedisProcessesShareASmallBudget(t *testing.T) {
	srv := redistest.Start(t)
	api := apisim.New()
	t.Cleanup(api.Close)
	const limit, requests, workers = 3, 15, 3
	env := sharedEnv(srv.URL(), limit, "second")
	children, total := runChildren(t, api, env, map[string]time.Duration{"a": 0, "b": 0}, requests, workers)
	require.Equal(t, requests*len(children), total, "every request is served")
	wireHolds(t, "at the server", arrivalsAt(api), limit, time.Second)
}

// spans describes, for each child, when its first and last requests
// arrived, from t0.
func spans(by map[string][]time.Time, t0 time.Time) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		at := by[name]
		parts = append(parts, fmt.Sprintf("%s %v-%v", name, at[0].Sub(t0).Round(time.Millisecond), at[len(at)-1].Sub(t0).Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// throttleLatency bounds the time from a 429 leaving the API server to the
// cooldown it causes being set in Redis: the answer reaching the process
// and the process's call to Redis, on a loaded machine.
const throttleLatency = 100 * time.Millisecond

func TestRedis429InOneProcessCoolsDownTheOthers(t *testing.T) {
	srv := redistest.Start(t)
	api := apisim.New()
	t.Cleanup(api.Close)
	const limit, cooldown = 20, 2 * time.Second
	var mu sync.Mutex
	var throttledAt time.Time
	seen := 0
	api.SetThrottle(func(r *http.Request) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		seen++
		if throttledAt.IsZero() && seen > 25 && r.Header.Get("User-Agent") == "a" {
			throttledAt = time.Now()
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}
		}
		return 0, nil
	})
	env := sharedEnv(srv.URL(), limit, "second")
	a := startChild(t, "a", api.URL, env, 40, 10, 0)
	b := startChild(t, "b", api.URL, env, 40, 10, 0)
	a.wait(t)
	b.wait(t)

	mu.Lock()
	at := throttledAt
	mu.Unlock()
	require.False(t, at.IsZero(), "the server answered one request with 429")
	require.Equal(t, api.Count("/api/v1/namespaces"), decisionCount(a, b), "one decision a request sent, retries included")
	// Nothing is let go from the moment the cooldown is set, a moment
	// after the 429 (its answer reaching process a, a's call to Redis),
	// until it ends, no sooner than cooldown after the 429.
	for _, c := range []*child{a, b} {
		for _, d := range c.decisions {
			assert.False(t, d.From.After(at.Add(throttleLatency)) && d.To.Before(at.Add(cooldown)),
				"process %s let a request go %v after the 429, during the cooldown", c.Name, d.From.Sub(at).Round(time.Millisecond))
		}
	}
	// And nothing reaches the server in that time, but requests already
	// on their way when the cooldown was set.
	for _, x := range arrivalsAt(api) {
		assert.False(t, x.After(at.Add(2*throttleLatency)) && x.Before(at.Add(cooldown)),
			"a request reached the server %v after the 429, during the cooldown", x.Sub(at).Round(time.Millisecond))
	}
	assert.True(t, slices.ContainsFunc(b.sends, func(x time.Time) bool { return x.After(at.Add(cooldown)) }),
		"the other process goes on after the cooldown")
	// After the cooldown both processes wait on the budget again, and the
	// window holds across them as before it.
	after := 0
	for _, c := range []*child{a, b} {
		for _, d := range c.decisions {
			if d.From.After(at.Add(cooldown)) {
				after++
			}
		}
	}
	require.Greater(t, after, limit, "more than a window's worth is let go after the cooldown")
	windowHolds(t, []*child{a, b}, limit, time.Second)
	wireHolds(t, "at the server", arrivalsAt(api), limit, time.Second)
}

func TestRedisKilledProcessDoesNotStallTheOthers(t *testing.T) {
	srv := redistest.Start(t)
	api := apisim.New()
	t.Cleanup(api.Close)
	// One request a second: the process to be killed reserves 30 seconds
	// ahead at once.
	env := append(sharedEnv(srv.URL(), 60, "minute"), "KUBERNETES_RATELIMIT_STRATEGY=linear")
	k := startChild(t, "k", api.URL, env, 30, 30, 0)
	require.Eventually(t, func() bool { return api.Count("/api/v1/namespaces") >= 1 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, k.Kill()) // SIGKILL: no Close, no cleanup
	killed := time.Now()

	b := startChild(t, "b", api.URL, env, 4, 4, 0)
	assert.Equal(t, 4, b.wait(t))
	took := time.Since(killed)
	// Without the presence timeout (3s) b would wait behind the killed
	// process's reservations, about 30s; with it, b's slots move into
	// theirs: 3s for the presence to expire, up to 2s until b refreshes
	// its own, 4 requests a second apart, and a margin.
	assert.Less(t, took, 12*time.Second, "the others are not stalled past the killed process's presence")
	t.Logf("the survivor sent its 4 requests %v after the kill", took.Round(time.Millisecond))
}

// TestRedisProcessesShareTheSeats: two processes sharing a fixed
// concurrency limit through Redis never have more requests in flight
// together than the limit, as the server counts them.
func TestRedisProcessesShareTheSeats(t *testing.T) {
	srv := redistest.Start(t)
	api := apisim.New()
	t.Cleanup(api.Close)
	const seats, requests, workers = 3, 60, 10
	api.SetCapacity(100, 0, 20*time.Millisecond) // each request takes 20ms
	env := append(sharedEnv(srv.URL(), 1000, "second"), "KUBERNETES_RATELIMIT_CONCURRENCY="+strconv.Itoa(seats))
	a := startChild(t, "a", api.URL, env, requests, workers, 0)
	b := startChild(t, "b", api.URL, env, requests, workers, 0)
	served := a.wait(t) + b.wait(t)
	assert.Equal(t, 2*requests, served, "every request is served")
	most := api.MostInFlight("/api/v1/namespaces")
	assert.LessOrEqual(t, most, seats, "requests the server served at once")
	assert.Positive(t, most)
}
