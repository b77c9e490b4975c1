package k8sratelimit_test

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// The metrics count what real traffic did, labelled by cluster name.
func TestMetricsAfterRealTraffic(t *testing.T) {
	srv := apisim.New()
	defer srv.Close()

	reg := prometheus.NewRegistry()
	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan = 2, 300*time.Millisecond
	wait := time.Second
	cfg.MaxWait = &wait
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithMetrics(reg))
	require.NoError(t, err)
	defer l.Close()

	rc := &rest.Config{Host: srv.URL}
	require.NoError(t, l.ConfigureCluster("prod", rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	ctx := context.Background()
	list := func(ctx context.Context) error {
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err
	}

	// Two admitted at once, one refused at once (the next slot is 300ms
	// away), one deferred.
	require.NoError(t, list(ctx))
	require.NoError(t, list(ctx))
	require.Error(t, list(k8sratelimit.WithMaxWait(ctx, 0)))
	require.NoError(t, list(ctx))
	// One exempt: a lease.
	_, err = cs.CoordinationV1().Leases("kube-system").Get(ctx, "leader", metav1.GetOptions{})
	require.NoError(t, err)
	// A 429 with Retry-After: 30 from the server, answered to the exempt lease.
	srv.SetThrottle(func(*http.Request) (int, http.Header) {
		return http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}}
	})
	rl := cs.CoordinationV1().RESTClient()
	_ = rl.Get().AbsPath("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/leader").MaxRetries(0).Do(ctx).Error()
	srv.SetThrottle(nil)

	requests := func(outcome string) float64 {
		class := "list"
		if outcome == "exempt" {
			class = ""
		}
		return counterValue(t, reg, "k8sratelimit_requests_total", map[string]string{"cluster": "prod", "class": class, "outcome": outcome})
	}
	assert.Equal(t, 2.0, requests("admitted"))
	assert.Equal(t, 1.0, requests("deferred"))
	assert.Equal(t, 1.0, requests("rejected"))
	assert.Equal(t, 2.0, requests("exempt"))

	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP k8sratelimit_server_throttles_total Throttling answers seen from API servers: 429, and 503 with Retry-After.
# TYPE k8sratelimit_server_throttles_total counter
k8sratelimit_server_throttles_total{cluster="prod",code="429"} 1
`), "k8sratelimit_server_throttles_total")
	assert.NoError(t, err)

	// The histogram has one observation per request sent, the deferred one
	// above 100ms.
	n, err := testutil.GatherAndCount(reg, "k8sratelimit_wait_seconds")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one series: cluster prod, class list")
	mfs, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	for _, name := range []string{"k8sratelimit_wait_seconds", "k8sratelimit_cooldown_seconds", "k8sratelimit_concurrency_limit", "k8sratelimit_seats_in_use", "k8sratelimit_seats_waiting"} {
		require.Contains(t, byName, name)
		require.Len(t, byName[name].GetMetric(), 1, name)
		for _, lp := range byName[name].GetMetric()[0].GetLabel() {
			if lp.GetName() == "cluster" {
				assert.Equal(t, "prod", lp.GetValue(), name)
			}
		}
	}
	h := byName["k8sratelimit_wait_seconds"].GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(3), h.GetSampleCount())
	assert.Greater(t, h.GetSampleSum(), 0.1)
	assert.InDelta(t, 30, byName["k8sratelimit_cooldown_seconds"].GetMetric()[0].GetGauge().GetValue(), 2, "the cooldown left, read at scrape time")
	assert.Equal(t, float64(limiter.InitialConcurrency), byName["k8sratelimit_concurrency_limit"].GetMetric()[0].GetGauge().GetValue(),
		"one request at a time does not grow the limit, and the 429 answered an exempt lease, which holds no seat")
	assert.Zero(t, byName["k8sratelimit_seats_in_use"].GetMetric()[0].GetGauge().GetValue(), "every response has been read")
	require.Contains(t, byName, "k8sratelimit_in_flight")
	assert.Len(t, byName["k8sratelimit_in_flight"].GetMetric(), limiter.NumClasses, "one series per class")
}

func TestMetricsRegisterOnlyOnTheGivenRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := k8sratelimit.New(k8sratelimit.DefaultConfig(), k8sratelimit.WithMetrics(reg))
	require.NoError(t, err)
	_, err = k8sratelimit.New(k8sratelimit.DefaultConfig(), k8sratelimit.WithMetrics(reg))
	assert.ErrorContains(t, err, "registering metrics", "twice on one registry is an error, not a panic")

	// Without WithMetrics nothing is registered on the default registry.
	before, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	_, err = k8sratelimit.New(k8sratelimit.DefaultConfig())
	require.NoError(t, err)
	after, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after))
}

// counterValue returns the value of the counter name with exactly labels
// in reg, or 0 when there is none.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := make(map[string]string)
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The store metrics count a Redis outage seen by real traffic: the errors,
// the outage, the requests the failure policy decided, and the return.
func TestMetricsOfARedisOutage(t *testing.T) {
	redisSrv := redistest.Start(t)
	api := apisim.New()
	defer api.Close()

	reg := prometheus.NewRegistry()
	cfg, err := k8sratelimit.LoadConfig([]string{
		"KUBERNETES_RATELIMIT_STORE=redis",
		"KUBERNETES_RATELIMIT_OWNER=metrics-test",
		"KUBERNETES_RATELIMIT_REDIS_URL=" + redisSrv.URL(),
	})
	require.NoError(t, err)
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithMetrics(reg))
	require.NoError(t, err)
	defer l.Close()
	rc := &rest.Config{Host: api.URL}
	require.NoError(t, l.ConfigureCluster("prod", rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	list := func() error {
		_, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		return err
	}

	require.NoError(t, list())
	assert.Equal(t, 1.0, gauge(t, reg, "k8sratelimit_store_available", nil))

	redisSrv.Kill()
	for range 3 {
		require.NoError(t, list(), "the local fallback admits")
	}
	assert.Equal(t, 0.0, gauge(t, reg, "k8sratelimit_store_available", nil))
	assert.Equal(t, 1.0, gauge(t, reg, "k8sratelimit_store_outages_total", nil))
	assert.GreaterOrEqual(t, gauge(t, reg, "k8sratelimit_store_errors_total", nil), 1.0)
	assert.Equal(t, 3.0, gauge(t, reg, "k8sratelimit_store_fallbacks_total", map[string]string{"policy": "local"}))

	redisSrv.Restart()
	require.Eventually(t, func() bool { return gauge(t, reg, "k8sratelimit_store_available", nil) == 1 },
		5*time.Second, 10*time.Millisecond, "the store is probed about once a second")
	require.NoError(t, list())
	assert.Equal(t, 3.0, gauge(t, reg, "k8sratelimit_store_fallbacks_total", map[string]string{"policy": "local"}))
}

// gauge returns the value of the series of name with labels (a counter's
// or a gauge's) gathered from reg, 0 when there is none.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
