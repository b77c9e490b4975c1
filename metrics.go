package k8sratelimit

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// WithMetrics registers the limiter's Prometheus metrics on reg. Nothing
// is registered anywhere else. Every metric is labelled by cluster — the
// registered cluster name, else the normalised API server — so the number
// of series grows with the number of clusters, never with owners, keys or
// requests. The class label is the request's traffic class (write, read,
// list, event; see Class): four values.
//
//	k8sratelimit_requests_total{cluster,class,outcome}  outcome: admitted, deferred, rejected, exempt (class "")
//	k8sratelimit_wait_seconds{cluster,class}        histogram of the wait of every counted request sent
//	k8sratelimit_server_throttles_total{cluster,code}  429s, and 503s with Retry-After, seen
//	k8sratelimit_cooldown_seconds{cluster}          cooldown left, read from the store at scrape time
//	k8sratelimit_concurrency_limit{cluster}         requests allowed in flight (seats): fixed, or as learned so far
//	k8sratelimit_seats_in_use{cluster}              requests in flight, or waiting for their slot with a seat
//	k8sratelimit_seats_waiting{cluster}             requests waiting for a seat
//	k8sratelimit_in_flight{cluster,class}           requests sent, their responses not finished (with seats)
//	k8sratelimit_store_errors_total                 failed calls to a shared store
//	k8sratelimit_store_outages_total                outages of a shared store (each starts the failure policy)
//	k8sratelimit_store_available                    1 while the shared store answers, 0 during an outage
//	k8sratelimit_store_fallbacks_total{policy}      requests decided by the failure policy (local, open, closed)
//
// The store metrics count a store New built from the configuration (a
// store passed with WithStore reports through its own options).
//
// New fails if the metrics cannot be registered (for example, twice on one
// registry).
func WithMetrics(reg prometheus.Registerer) Option {
	return func(o *options) { o.metrics = reg }
}

// metrics is the limiter.Observer behind WithMetrics.
type metrics struct {
	requests  *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	throttles *prometheus.CounterVec

	storeErrors    prometheus.Counter
	storeOutages   prometheus.Counter
	storeAvailable prometheus.Gauge
	storeFallbacks *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "k8sratelimit_requests_total",
			Help: "Requests to Kubernetes API servers by outcome: admitted at once, deferred (admitted after waiting), rejected (RateLimitExceededError), exempt (never counted).",
		}, []string{"cluster", "class", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "k8sratelimit_wait_seconds",
			Help:    "Time counted requests waited for their slot before being sent (0 for those admitted at once).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"cluster", "class"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "k8sratelimit_server_throttles_total",
			Help: "Throttling answers seen from API servers: 429, and 503 with Retry-After.",
		}, []string{"cluster", "code"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "k8sratelimit_store_errors_total",
			Help: "Failed calls to the shared store (Redis), timeouts included.",
		}),
		storeOutages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "k8sratelimit_store_outages_total",
			Help: "Outages of the shared store: times it stopped answering and the failure policy took over.",
		}),
		storeAvailable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "k8sratelimit_store_available",
			Help: "1 while the shared store answers, 0 during an outage.",
		}),
		storeFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "k8sratelimit_store_fallbacks_total",
			Help: "Requests decided by the store failure policy during an outage: local, open or closed.",
		}, []string{"policy"}),
	}
}

// storeEvent counts a shared store's event.
func (m *metrics) storeEvent(e store.Event) {
	switch e.Type {
	case store.EventError:
		m.storeErrors.Inc()
	case store.EventDown:
		m.storeOutages.Inc()
		m.storeAvailable.Set(0)
	case store.EventUp:
		m.storeAvailable.Set(1)
	case store.EventFallback:
		m.storeFallbacks.WithLabelValues(string(e.Policy)).Inc()
	}
}

// register registers the metrics, and the cooldown gauge read from
// engine, on reg.
func (m *metrics) register(reg prometheus.Registerer, engine *limiter.Engine) error {
	collectors := []prometheus.Collector{m.requests, m.wait, m.throttles, cooldownCollector{engine}, seatsCollector{engine}}
	if _, shared := engine.Store().(store.Failover); shared {
		m.storeAvailable.Set(1)
		collectors = append(collectors, m.storeErrors, m.storeOutages, m.storeAvailable, m.storeFallbacks)
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *metrics) Admitted(cluster, _ string, c limiter.Class, wait time.Duration, _ limiter.WaitReason) {
	outcome := "admitted"
	if wait > 0 {
		outcome = "deferred"
	}
	m.requests.WithLabelValues(cluster, c.String(), outcome).Inc()
	m.wait.WithLabelValues(cluster, c.String()).Observe(wait.Seconds())
}

func (m *metrics) Rejected(cluster, _ string, c limiter.Class, _ time.Duration) {
	m.requests.WithLabelValues(cluster, c.String(), "rejected").Inc()
}

func (m *metrics) Exempt(cluster, _ string) {
	m.requests.WithLabelValues(cluster, "", "exempt").Inc()
}

func (m *metrics) Throttled(cluster, _ string, code int, _ time.Duration) {
	m.throttles.WithLabelValues(cluster, strconv.Itoa(code)).Inc()
}

// cooldownCollector reports the cooldown left on each budget at scrape
// time, the largest per cluster name.
type cooldownCollector struct{ engine *limiter.Engine }

var cooldownDesc = prometheus.NewDesc("k8sratelimit_cooldown_seconds",
	"Cooldown left on the budget after a server's 429 (or 503 with Retry-After), 0 when none.",
	[]string{"cluster"}, nil)

func (c cooldownCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cooldownDesc }

func (c cooldownCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	left := make(map[string]time.Duration)
	for _, b := range c.engine.Budgets() {
		d, err := b.Cooldown(ctx)
		if err != nil {
			continue
		}
		left[b.Cluster()] = max(left[b.Cluster()], d)
	}
	for cluster, d := range left {
		ch <- prometheus.MustNewConstMetric(cooldownDesc, prometheus.GaugeValue, d.Seconds(), cluster)
	}
}

// observers tells each of its observers of every decision.
type observers []limiter.Observer

func (os observers) Admitted(cluster, key string, c limiter.Class, wait time.Duration, reason limiter.WaitReason) {
	for _, o := range os {
		o.Admitted(cluster, key, c, wait, reason)
	}
}

func (os observers) Rejected(cluster, key string, c limiter.Class, retryAfter time.Duration) {
	for _, o := range os {
		o.Rejected(cluster, key, c, retryAfter)
	}
}

func (os observers) Exempt(cluster, key string) {
	for _, o := range os {
		o.Exempt(cluster, key)
	}
}

func (os observers) Throttled(cluster, key string, code int, cooldown time.Duration) {
	for _, o := range os {
		o.Throttled(cluster, key, code, cooldown)
	}
}

// seatsCollector reports each budget's concurrency limit and its use at
// scrape time, summed per cluster name.
type seatsCollector struct{ engine *limiter.Engine }

var (
	concurrencyLimitDesc = prometheus.NewDesc("k8sratelimit_concurrency_limit",
		"Requests allowed in flight at once (seats): the fixed limit, or the adaptive limit as learned so far.",
		[]string{"cluster"}, nil)
	seatsInUseDesc = prometheus.NewDesc("k8sratelimit_seats_in_use",
		"Seats held: requests sent whose responses are not finished, and requests waiting for their slot with a seat.",
		[]string{"cluster"}, nil)
	seatsWaitingDesc = prometheus.NewDesc("k8sratelimit_seats_waiting",
		"Requests waiting for a seat.",
		[]string{"cluster"}, nil)
	inFlightDesc = prometheus.NewDesc("k8sratelimit_in_flight",
		"Requests sent whose responses are not finished, by traffic class (budgets with a concurrency limit).",
		[]string{"cluster", "class"}, nil)
)

func (c seatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- concurrencyLimitDesc
	ch <- seatsInUseDesc
	ch <- seatsWaitingDesc
	ch <- inFlightDesc
}

func (c seatsCollector) Collect(ch chan<- prometheus.Metric) {
	sum := make(map[string]limiter.SeatStatus)
	for _, b := range c.engine.Budgets() {
		s := b.Seats()
		if s.Limit == 0 {
			continue
		}
		t := sum[b.Cluster()]
		t.Limit += s.Limit
		t.InUse += s.InUse
		t.Waiting += s.Waiting
		for c := range t.ByClass {
			t.ByClass[c].InFlight += s.ByClass[c].InFlight
		}
		sum[b.Cluster()] = t
	}
	for cluster, s := range sum {
		ch <- prometheus.MustNewConstMetric(concurrencyLimitDesc, prometheus.GaugeValue, float64(s.Limit), cluster)
		ch <- prometheus.MustNewConstMetric(seatsInUseDesc, prometheus.GaugeValue, float64(s.InUse), cluster)
		ch <- prometheus.MustNewConstMetric(seatsWaitingDesc, prometheus.GaugeValue, float64(s.Waiting), cluster)
		for c, cs := range s.ByClass {
			ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(cs.InFlight), cluster, limiter.Class(c).String())
		}
	}
}
