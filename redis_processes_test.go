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
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
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
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(chaosEnv) != "" {
		os.Exit(runChaosChild())
	}
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
// from the environment, prints "sent <n> failed <n>" and exits 0; it exits
// 2 when it cannot start.
func runChild() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 2 }
	cfg, err := k8sratelimit.LoadConfig(os.Environ())
	if err != nil {
		return fail(err)
	}
	skew, _ := time.ParseDuration(os.Getenv(childSkew))
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	// The store New would make from cfg, made here to time its decisions.
	rs, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{Failure: cfg.StoreFailure, Logger: logger})
	if err != nil {
		return fail(err)
	}
	defer rs.Close()
	var decisions decided.Recorder
	lim, err := k8sratelimit.New(cfg, k8sratelimit.WithClock(skewedClock{skew: skew}), k8sratelimit.WithLogger(logger),
		k8sratelimit.WithStore(decidingStore{Store: rs, decisions: &decisions}))
	if err != nil {
		return fail(err)
	}
	defer lim.Close()
	rc := &rest.Config{Host: os.Getenv(childAPI), UserAgent: os.Getenv(childEnv)}
	var sendsMu sync.Mutex
	var sends []int64
	// Below the limiter: when each counted request leaves the process.
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return harness.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/api/v1/namespaces" {
				sendsMu.Lock()
				sends = append(sends, time.Now().UnixNano())
				sendsMu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	if err := lim.Configure(rc); err != nil {
		return fail(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fail(err)
	}
	n, _ := strconv.Atoi(os.Getenv(childRequests))
	workers, _ := strconv.Atoi(os.Getenv(childWorkers))
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	var sent, failed sync.WaitGroup
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
	failed.Wait()
	for _, at := range sends {
		fmt.Printf("at %d\n", at)
	}
	for _, d := range decisions.Spans() {
		fmt.Printf("decided %d %d\n", d.From.UnixNano(), d.To.UnixNano())
	}
	fmt.Printf("sent %d failed %d\n", nsent, nfailed)
	return 0
}

// decidingStore is a child's Redis store, recording the span of every call
// in which it let a request go: a Reserve with no wait, a Confirm with none
// left. It embeds the store itself, so that the limiter still finds the
// store's optional interfaces (store.Notifier, store.SeatSharer).
type decidingStore struct {
	*redisstore.Store
	decisions *decided.Recorder
}

func (s decidingStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	from := time.Now()
	res, err := s.Store.Reserve(ctx, key, p, r)
	if err == nil && res.OK && res.Wait == 0 {
		s.decisions.Add(from, time.Now())
	}
	return res, err
}

func (s decidingStore) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	from := time.Now()
	left, err := s.Store.Confirm(ctx, key, id)
	if err == nil && left == 0 {
		s.decisions.Add(from, time.Now())
	}
	return left, err
}

// child is one child process.
type child struct {
	name      string
	sends     []time.Time    // when its counted requests left it
	decisions []decided.Span // when the store let them go
	cmd       *exec.Cmd
	out       strings.Builder
}

// sharedEnv is the configuration every child shares.
func sharedEnv(redisURL string, limit int, timespan string) []string {
	return []string{
		"KUBERNETES_RATELIMIT=" + strconv.Itoa(limit),
		"KUBERNETES_RATELIMIT_TIMESPAN=" + timespan,
		"KUBERNETES_RATELIMIT_STORE=redis",
		"KUBERNETES_RATELIMIT_REDIS_URL=" + redisURL,
		"KUBERNETES_RATELIMIT_OWNER=process-test",
	}
}

// startChild starts a child process named name that sends requests
// requests from workers goroutines, its clock off by skew.
func startChild(t *testing.T, name, api string, env []string, requests, workers int, skew time.Duration) *child {
	t.Helper()
	c := &child{name: name}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(append(os.Environ(), env...),
		childEnv+"="+name, childAPI+"="+api,
		childRequests+"="+strconv.Itoa(requests), childWorkers+"="+strconv.Itoa(workers),
		childSkew+"="+skew.String())
	c.cmd.Stdout = &c.out
	c.cmd.Stderr = &c.out
	require.NoError(t, c.cmd.Start())
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	return c
}

// wait waits for the child to end and returns how many requests it sent.
func (c *child) wait(t *testing.T) int {
	t.Helper()
	require.NoError(t, c.cmd.Wait(), "child %s: %s", c.name, c.out.String())
	var sent, failed int
	var logs []string
	sc := bufio.NewScanner(strings.NewReader(c.out.String()))
	for sc.Scan() {
		var at int64
		if _, err := fmt.Sscanf(sc.Text(), "at %d", &at); err == nil {
			c.sends = append(c.sends, time.Unix(0, at))
			continue
		}
		var from, to int64
		if _, err := fmt.Sscanf(sc.Text(), "decided %d %d", &from, &to); err == nil {
			c.decisions = append(c.decisions, decided.Span{From: time.Unix(0, from), To: time.Unix(0, to)})
			continue
		}
		if _, err := fmt.Sscanf(sc.Text(), "sent %d failed %d", &sent, &failed); err == nil {
			assert.Zero(t, failed, "child %s: %s", c.name, strings.Join(logs, "\n"))
			if len(logs) > 0 {
				t.Logf("child %s:\n%s", c.name, strings.Join(logs, "\n"))
			}
			return sent
		}
		logs = append(logs, sc.Text())
	}
	t.Fatalf("child %s printed no result: %s", c.name, c.out.String())
	return 0
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
	var children []*child
	for name, skew := range skews {
		children = append(children, startChild(t, name, api.URL, env, requests, workers, skew))
	}
	total := 0
	for _, c := range children {
		total += c.wait(t)
	}
	require.Equal(t, requests*len(skews), total, "every request is served")

	var all []time.Time
	by := map[string][]time.Time{}
	for _, c := range children {
		all = append(all, c.sends...)
		by[c.name] = c.sends
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	require.Len(t, all, total)
	require.Len(t, arrivalsAt(api), total, "the server saw every request")
	require.Equal(t, total, decisionCount(children...), "one decision a request")
	windowHolds(t, children, limit, time.Second)

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
				"process %s let a request go %v after the 429, during the cooldown", c.name, d.From.Sub(at).Round(time.Millisecond))
		}
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
	require.NoError(t, k.cmd.Process.Kill()) // SIGKILL: no Close, no cleanup
	_ = k.cmd.Wait()
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
