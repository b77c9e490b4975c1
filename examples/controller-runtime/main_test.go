package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/limiter"
)

const (
	namespace     = "demo"
	configMapName = "settings"
	leaseName     = "example-lease"
	// patience bounds every wait for the manager.
	patience = 30 * time.Second
)

// TestMain gives controller-runtime a logger before the tests run.
func TestMain(m *testing.M) {
	// Logs go to stderr, which go test shows for failing packages and
	// with -v.
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	os.Exit(m.Run())
}

// TestManagerSharesOneBudget runs the manager against a fake API server,
// with the ConfigMaps' initial state streamed by a watch-list (API servers
// from 1.27) and, from an API server that refuses watch-lists, by a list
// followed by a watch.
func TestManagerSharesOneBudget(t *testing.T) {
	const configMaps = "/api/v1/namespaces/" + namespace + "/configmaps"
	for _, mode := range []struct {
		name      string
		watchList bool
		cacheSent []string // the cache's requests for the ConfigMaps
	}{
		{"watch-list", true, []string{"GET " + configMaps + "?watch=true&sendInitialEvents=true"}},
		{"list then watch", false, []string{"GET " + configMaps, "GET " + configMaps + "?watch=true"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			testManagerSharesOneBudget(t, mode.watchList, mode.cacheSent)
		})
	}
}

// testManagerSharesOneBudget runs the manager until it has reconciled the
// seeded ConfigMap, stops it, and checks that every request it sent went
// through the one budget of the API server: leases exempt, the rest
// counted. cacheSent are requests the cache must have sent.
func testManagerSharesOneBudget(t *testing.T, watchList bool, cacheSent []string) {
	api := newFakeAPIServer(t, watchList)
	api.SeedConfigMap(namespace, configMapName, map[string]string{"greeting": "hello"})

	obs := &countingObserver{}
	reg := prometheus.NewRegistry()
	lim, err := newLimiter(nil, reg, k8sratelimit.WithObserver(obs))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })

	rc := &rest.Config{Host: api.URL()}
	sent := &sentRequests{}
	rc.Wrap(sent.wrap) // under the limiter's transport, which Configure adds on top
	budget, err := lim.Budget("", rc)
	require.NoError(t, err)
	require.NotNil(t, budget)

	stop := startRun(t, rc, lim, options{
		namespace:          namespace,
		leaderElectionID:   leaseName,
		metricsAddr:        "0",
		skipNameValidation: true,
	})

	require.Eventually(t, func() bool {
		cm := api.ConfigMap(namespace, configMapName)
		return cm != nil && cm.Annotations[reconciledAnnotation] == "true"
	}, patience, 10*time.Millisecond, "the reconciler never annotated the ConfigMap")
	lease := api.Lease(namespace, leaseName)
	require.NotNil(t, lease, "leader election never created its lease")
	assert.NotEmpty(t, ptr.Deref(lease.Spec.HolderIdentity, ""), "the reconciler ran without holding the lease")

	require.NoError(t, stop())
	assert.Empty(t, ptr.Deref(api.Lease(namespace, leaseName).Spec.HolderIdentity, ""), "the lease was not released on exit")
	assert.Equal(t, map[string]string{"greeting": "hello"}, api.ConfigMap(namespace, configMapName).Data, "the patch touched the data")
	assert.Empty(t, api.Unserved(), "the manager asked for paths the fake API server does not serve")

	// Every request that left the limiter was decided by it: the leases
	// exempt, everything else counted, and the metrics say the same under
	// the API server's name. A request is decided before it is sent, and
	// the event recorder may still be sending one after the manager has
	// stopped, so wait until the numbers meet.
	var got observed
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		others, leases := sent.split()
		got = obs.snapshot()
		byOutcome := requestsByOutcome(c, reg, budget.Cluster())
		assert.Equal(c, others, got.admitted, "counted requests")
		assert.Equal(c, leases, got.exempt, "exempt requests")
		assert.Equal(c, map[string]float64{"admitted": float64(got.admitted), "exempt": float64(got.exempt)},
			byOutcome, "k8sratelimit_requests_total by outcome")
	}, patience, 10*time.Millisecond, "sent: %v", sent)

	assert.Equal(t, []string{budget.Key()}, got.keys, "the requests went through more than one budget")
	assert.Zero(t, got.rejected)
	assert.Positive(t, got.exempt)

	// What the manager sent: discovery for the RESTMapper, the cache's
	// list and watch of the ConfigMaps, the reconciler's patch, leader
	// election's lease — all through the one budget.
	const leases = "/apis/coordination.k8s.io/v1/namespaces/" + namespace + "/leases"
	want := append([]string{
		"GET /api", "GET /apis", "GET /api/v1", // discovery
		"PATCH /api/v1/namespaces/" + namespace + "/configmaps/" + configMapName, // the reconciler's patch
		"GET " + leases + "/" + leaseName, "POST " + leases,                      // leader election: acquire
		"PUT " + leases + "/" + leaseName, // leader election: release on exit
	}, cacheSent...)
	assert.Subset(t, sent.all(), want)
}

// startRun runs run in a goroutine until the returned stop is called, or
// the test ends. stop cancels run's context and returns what run
// returned.
func startRun(t *testing.T, rc *rest.Config, lim *k8sratelimit.Limiter, o options) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, rc, lim, o) }()

	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(patience):
				runErr = errors.New("the manager did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// countingObserver counts the limiter's decisions and the budgets they
// were made for.
type countingObserver struct {
	mu    sync.Mutex
	stats observed
}

// observed is what a countingObserver has counted.
type observed struct {
	admitted, exempt, rejected, throttled int
	keys                                  []string // the budget keys seen, in order of first sight
}

// Admitted counts a request admitted, at once or after waiting.
func (o *countingObserver) Admitted(_, key string, _ limiter.Class, _ time.Duration, _ limiter.WaitReason) {
	o.count(key, &o.stats.admitted)
}

// Rejected counts a request refused.
func (o *countingObserver) Rejected(_, key string, _ limiter.Class, _ time.Duration) {
	o.count(key, &o.stats.rejected)
}

// Exempt counts a request passed without counting against the budget.
func (o *countingObserver) Exempt(_, key string) {
	o.count(key, &o.stats.exempt)
}

// Throttled counts a server's throttling answer.
func (o *countingObserver) Throttled(_, key string, _ int, _ time.Duration) {
	o.count(key, &o.stats.throttled)
}

// count adds one to n and remembers key.
func (o *countingObserver) count(key string, n *int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	*n++
	if !slices.Contains(o.stats.keys, key) {
		o.stats.keys = append(o.stats.keys, key)
	}
}

// snapshot returns what has been counted so far.
func (o *countingObserver) snapshot() observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	s.keys = append([]string(nil), s.keys...)
	return s
}

// sentRequests records the requests a transport under the limiter's
// passes on: those the limiter let go.
type sentRequests struct {
	mu   sync.Mutex
	reqs []string // "METHOD path[?watch=true[&sendInitialEvents=true]]"
}

// wrap returns rt recording every request it is given.
func (s *sentRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		entry := req.Method + " " + req.URL.Path
		if q := req.URL.Query(); q.Get("watch") == "true" {
			entry += "?watch=true"
			if q.Get("sendInitialEvents") == "true" {
				entry += "&sendInitialEvents=true"
			}
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, entry)
		s.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// String returns the requests recorded so far, for messages.
func (s *sentRequests) String() string { return fmt.Sprint(s.all()) }

// all returns the requests recorded so far.
func (s *sentRequests) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// split returns the number of requests recorded for coordination.k8s.io
// leases, and of the others.
func (s *sentRequests) split() (others, leases int) {
	for _, r := range s.all() {
		if strings.Contains(r, "/apis/coordination.k8s.io/") && strings.Contains(r, "/leases") {
			leases++
		} else {
			others++
		}
	}
	return others, leases
}

// roundTripperFunc is an http.RoundTripper made of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestsByOutcome returns the values of k8sratelimit_requests_total in
// reg by outcome, failing t for a series of another cluster.
func requestsByOutcome(t require.TestingT, reg prometheus.Gatherer, cluster string) map[string]float64 {
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "k8sratelimit_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			assert.Equal(t, cluster, labels["cluster"])
			out[labels["outcome"]] += m.GetCounter().GetValue()
		}
	}
	return out
}
