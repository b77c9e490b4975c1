package limiter_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/k8sratelimit/k8sratelimit/internal/benchref"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// The admission benchmarks measure a request admitted at once, on a budget
// with room to spare: benchPolicy admits up to 100 requests per
// microsecond and keeps 100-150 live entries at benchmark speed, the same
// order as the default of 400 per minute in full use.
var benchPolicy = store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: 10 * time.Microsecond}

const benchCluster = "bench"

// benchDeferCounter counts the requests that were not admitted at once. On a
// roomy budget none should be; the benchmarks report the count.
type benchDeferCounter struct {
	limiter.NopObserver
	deferred atomic.Int64
	maxWait  atomic.Int64
}

func (c *benchDeferCounter) Admitted(_, _ string, _ limiter.Class, wait time.Duration, _ limiter.WaitReason) {
	if wait != 0 {
		c.deferred.Add(1)
		for old := c.maxWait.Load(); int64(wait) > old && !c.maxWait.CompareAndSwap(old, int64(wait)); old = c.maxWait.Load() {
		}
	}
}

func (c *benchDeferCounter) report(b *testing.B) {
	b.ReportMetric(float64(c.deferred.Load()), "deferred")
	b.ReportMetric(float64(c.maxWait.Load()), "maxwait-ns")
}

func benchBudget(obs limiter.Observer) *limiter.Budget {
	l := limiter.New(memorystore.New(nil), limiter.Options{Policy: benchPolicy, Observer: obs})
	return l.Budget(benchref.Key, benchCluster)
}

// benchSeatedBudget is benchBudget with the adaptive concurrency limit
// that the root package configures by default: the transport benchmarks
// measure what users get.
func benchSeatedBudget() *limiter.Budget {
	l := limiter.New(memorystore.New(nil), limiter.Options{Policy: benchPolicy, Concurrency: limiter.Concurrency{Adaptive: true}})
	return l.Budget(benchref.Key, benchCluster)
}

// BenchmarkBudgetWait is Budget.Wait admitting at once, with the default
// options (no maximum wait, no jitter). The serial variant fails on any
// request that is not admitted at once; the parallel one counts them
// ("deferred": see BENCHMARKS.md).
func BenchmarkBudgetWait(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		obs := &benchDeferCounter{}
		budget := benchBudget(obs)
		b.ReportAllocs()
		for b.Loop() {
			if err := budget.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if n := obs.deferred.Load(); n != 0 {
			b.Fatalf("%d requests were not admitted at once", n)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		obs := &benchDeferCounter{}
		budget := benchBudget(obs)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := budget.Wait(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		obs.report(b)
	})
}

// BenchmarkRateLimiterTryAccept is the flowcontrol.RateLimiter adapter's
// TryAccept (maximum wait 0), to compare with client-go's own below. The
// parallel variant counts the requests refused on the roomy budget
// ("refused": see BENCHMARKS.md) instead of failing.
func BenchmarkRateLimiterTryAccept(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		rl := benchBudget(nil).RateLimiter()
		b.ReportAllocs()
		for b.Loop() {
			if !rl.TryAccept() {
				b.Fatal("TryAccept = false")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		rl := benchBudget(nil).RateLimiter()
		var refused atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !rl.TryAccept() {
					refused.Add(1)
				}
			}
		})
		b.ReportMetric(float64(refused.Load()), "refused")
	})
}

// BenchmarkRateAllow is golang.org/x/time/rate's Allow, for comparison:
// "finite" with a limit it never reaches (the token arithmetic runs),
// "inf" with rate.Inf (Allow returns before any arithmetic).
func BenchmarkRateAllow(b *testing.B) {
	b.Run("finite", func(b *testing.B) { benchref.Admit(b, benchref.RateAllow) })
	b.Run("inf", func(b *testing.B) { benchref.Admit(b, benchref.RateAllowInf) })
}

// BenchmarkFlowcontrolTryAccept is client-go's token bucket (the default
// limiter of every rest.Config) with a limit it never reaches, for
// comparison.
func BenchmarkFlowcontrolTryAccept(b *testing.B) {
	benchref.Admit(b, benchref.FlowcontrolTryAccept)
}

// BenchmarkAdmissionPaired is Budget.Wait against x/time/rate's Allow and
// flowcontrol's TryAccept on one goroutine, interleaved; the ratio metrics
// are Budget.Wait's cost over theirs.
func BenchmarkAdmissionPaired(b *testing.B) {
	ctx := context.Background()
	obs := &benchDeferCounter{}
	budget := benchBudget(obs)
	benchref.Paired(b, []string{"wait", "rate", "flowcontrol"}, []func() bool{
		func() bool { return budget.Wait(ctx) == nil },
		benchref.RateAllow(),
		benchref.FlowcontrolTryAccept(),
	}, 1)
	if n := obs.deferred.Load(); n != 0 {
		b.Fatalf("%d requests were not admitted at once", n)
	}
}

// benchPath is a typical namespaced GET, so that the exemption checks
// parse a realistic path.
const benchPath = "/api/v1/namespaces/default/pods/demo"

// benchStubTransport answers every request at once with a shared empty
// response: it isolates the limiter's own cost per request.
type benchStubTransport struct{}

func (benchStubTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return benchStubResponse, nil
}

var benchStubResponse = &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}

// BenchmarkTransportOverhead is the wrapped Transport's RoundTrip over a
// transport that does nothing, against calling that transport directly:
// the cost the limiter adds to each request, without any network.
func BenchmarkTransportOverhead(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "https://apiserver.example:6443"+benchPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	transports := []struct {
		name string
		rt   func() http.RoundTripper
	}{
		{"stub", func() http.RoundTripper { return benchStubTransport{} }},
		{"wrapped-rate-only", func() http.RoundTripper { return benchBudget(nil).Wrap(benchStubTransport{}) }},
		{"wrapped", func() http.RoundTripper { return benchSeatedBudget().Wrap(benchStubTransport{}) }},
	}
	for _, tr := range transports {
		b.Run(tr.name+"/serial", func(b *testing.B) {
			rt := tr.rt()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tr.name+"/parallel", func(b *testing.B) {
			rt := tr.rt()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := rt.RoundTrip(req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// benchBareTransport is the transport of the GET benchmarks: the default
// transport's settings, with room to keep a connection per goroutine.
func benchBareTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// benchGet makes one GET with c and reads the whole response, so that the
// connection is reused.
func benchGet(c *http.Client, url string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || n != 2 {
		return &benchUnexpected{resp.StatusCode, n}
	}
	return nil
}

// BenchmarkTransportGET is one GET to a loopback httptest server that
// answers "ok", through a bare http.Transport and through the same kind of
// transport wrapped by the limiter: same server, same client settings,
// connections reused.
func BenchmarkTransportGET(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	url := srv.URL + benchPath

	clients := []struct {
		name string
		rt   func(*http.Transport) http.RoundTripper
	}{
		{"bare", func(t *http.Transport) http.RoundTripper { return t }},
		{"wrapped", func(t *http.Transport) http.RoundTripper { return benchSeatedBudget().Wrap(t) }},
	}
	for _, cl := range clients {
		b.Run(cl.name+"/serial", func(b *testing.B) {
			bare := benchBareTransport()
			defer bare.CloseIdleConnections()
			c := &http.Client{Transport: cl.rt(bare)}
			b.ReportAllocs()
			for b.Loop() {
				if err := benchGet(c, url); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(cl.name+"/parallel", func(b *testing.B) {
			bare := benchBareTransport()
			defer bare.CloseIdleConnections()
			c := &http.Client{Transport: cl.rt(bare)}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := benchGet(c, url); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// benchOrders are the orders of the three clients of
// BenchmarkTransportGETPaired, used in turn: each client comes first,
// second and third, after each of the others, equally often.
var benchOrders = [...][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}

// BenchmarkTransportGETPaired is BenchmarkTransportGET with three clients
// taking turns, one GET each per iteration in varying order, each GET
// timed, so that all see the same background load: a bare client, a second
// bare client configured identically (an A/A control: its ratio to the
// first shows the noise floor), and the wrapped client. It reports ns per
// GET of the first bare and the wrapped client, wrapped/bare,
// control/bare and wrapped/control.
func BenchmarkTransportGETPaired(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	url := srv.URL + benchPath

	run := func(b *testing.B, parallel bool) {
		var clients [3]*http.Client // bare, control, wrapped
		for i := range clients {
			t := benchBareTransport()
			defer t.CloseIdleConnections()
			var rt http.RoundTripper = t
			if i == 2 {
				rt = benchSeatedBudget().Wrap(t)
			}
			clients[i] = &http.Client{Transport: rt}
		}
		var ns [3]atomic.Int64
		var n atomic.Int64
		step := func(i int) error {
			for _, k := range benchOrders[i%len(benchOrders)] {
				start := time.Now()
				if err := benchGet(clients[k], url); err != nil {
					return err
				}
				ns[k].Add(int64(time.Since(start)))
			}
			n.Add(1)
			return nil
		}
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					if err := step(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		} else {
			for i := 0; i < b.N; i++ {
				if err := step(i); err != nil {
					b.Fatal(err)
				}
			}
		}
		bare, control, wrapped := float64(ns[0].Load()), float64(ns[1].Load()), float64(ns[2].Load())
		if n.Load() == 0 || bare == 0 {
			return
		}
		b.ReportMetric(bare/float64(n.Load()), "bare-ns/GET")
		b.ReportMetric(wrapped/float64(n.Load()), "wrapped-ns/GET")
		b.ReportMetric(wrapped/bare, "wrapped/bare")
		b.ReportMetric(control/bare, "control/bare")
		b.ReportMetric(wrapped/control, "wrapped/control")
	}
	b.Run("serial", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}

type benchUnexpected struct {
	code int
	n    int64
}

func (u *benchUnexpected) Error() string {
	return fmt.Sprintf("unexpected response: %d, %d bytes", u.code, u.n)
}

// BenchmarkClassesPaired is the cost of the traffic classes to a request
// admitted at once, on one goroutine, interleaved: Budget.Wait, and the
// Transport's RoundTrip of a namespaced GET over a transport that does
// nothing (with the default adaptive concurrency limit), each with the
// default class weights against one line for all. The ratio metrics are
// the classes' cost over one line's.
func BenchmarkClassesPaired(b *testing.B) {
	w := limiter.DefaultWeights
	budget := func(classes *limiter.Weights, c limiter.Concurrency) *limiter.Budget {
		l := limiter.New(memorystore.New(nil), limiter.Options{Policy: benchPolicy, Classes: classes, Concurrency: c})
		return l.Budget(benchref.Key, benchCluster)
	}
	b.Run("wait", func(b *testing.B) {
		ctx := context.Background()
		classes, oneLine := budget(&w, limiter.Concurrency{}), budget(nil, limiter.Concurrency{})
		benchref.Paired(b, []string{"classes", "one-line"}, []func() bool{
			func() bool { return classes.Wait(ctx) == nil },
			func() bool { return oneLine.Wait(ctx) == nil },
		}, 1)
	})
	b.Run("transport", func(b *testing.B) {
		req, err := http.NewRequest(http.MethodGet, "https://apiserver.example:6443"+benchPath, nil)
		if err != nil {
			b.Fatal(err)
		}
		seated := limiter.Concurrency{Adaptive: true}
		classes, oneLine := budget(&w, seated).Wrap(benchStubTransport{}), budget(nil, seated).Wrap(benchStubTransport{})
		roundTrip := func(rt http.RoundTripper) func() bool {
			return func() bool {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					return false
				}
				_ = resp.Body.Close()
				return true
			}
		}
		benchref.Paired(b, []string{"classes", "one-line"}, []func() bool{roundTrip(classes), roundTrip(oneLine)}, 1)
	})
}
