package k8sratelimit_test

// Integration tests of Configure, ConfigureCluster, RateLimiter and the
// process default with real client-go clientsets against the simulated API
// server in internal/apisim.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/cluster"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
)

// cfgLimiter returns an enabled limiter of limit requests per span, with
// the maximum wait maxWait (nil: none) and no adaptive cooldown.
func cfgLimiter(t *testing.T, limit int, span time.Duration, maxWait *time.Duration, opts ...k8sratelimit.Option) *k8sratelimit.Limiter {
	t.Helper()
	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan, cfg.MaxWait, cfg.Adaptive = limit, span, maxWait, false
	l, err := k8sratelimit.New(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func cfgServer(t *testing.T) *apisim.Server {
	t.Helper()
	srv := apisim.New()
	t.Cleanup(srv.Close)
	return srv
}

func cfgClientset(t *testing.T, rc *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs
}

func cfgGet(cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	return err
}

// cfgAPIServer is the normalised API server of a URL.
func cfgAPIServer(t *testing.T, u string) string {
	t.Helper()
	s, err := cluster.APIServer(u)
	require.NoError(t, err)
	return s
}

// cfgCounter is a WrapTransport that counts the requests it sees.
type cfgCounter struct{ n atomic.Int32 }

func (c *cfgCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return harness.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.n.Add(1)
		return rt.RoundTrip(req)
	})
}

// ---------------------------------------------------------------------------
// Budget identity

// Two rest.Configs for the same API server with different credentials
// share one budget.
func TestClientGoOneBudgetAcrossCredentials(t *testing.T) {
	srv := cfgServer(t)
	l := cfgLimiter(t, 1, time.Hour, new(time.Duration(0)))

	rcA := &rest.Config{Host: srv.URL, BearerToken: "token-a"}
	rcB := &rest.Config{Host: srv.URL, BearerToken: "token-b", UserAgent: "another-agent"}
	require.NoError(t, l.Configure(rcA))
	require.NoError(t, l.Configure(rcB))

	require.NoError(t, cfgGet(cfgClientset(t, rcA), "a"))
	rle := harness.RateLimitExceeded(t, cfgGet(cfgClientset(t, rcB), "b"))
	assert.Equal(t, cluster.Key(k8sratelimit.DefaultOwner, cfgAPIServer(t, srv.URL)), rle.Key)

	reqs := srv.Requests()
	require.Len(t, reqs, 1, "only the first client's request was sent")
	assert.Equal(t, "Bearer token-a", reqs[0].Header.Get("Authorization"))
}

// cfgPrefixProxy is a server that serves apisim under /k8s/clusters/<name>,
// as a multi-cluster proxy does, and counts the requests per cluster.
func cfgPrefixProxy(t *testing.T, srv *apisim.Server) (*httptest.Server, func(name string) int) {
	t.Helper()
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	counts := map[string]int{}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/k8s/clusters/")
		name, path, found := strings.Cut(rest, "/")
		if !ok || !found {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		counts[name]++
		mu.Unlock()
		r.URL.Path, r.URL.RawPath = "/"+path, ""
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	return proxy, func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[name]
	}
}

// Two API servers behind one host, told apart by their path prefixes, have
// separate budgets.
func TestClientGoSeparateBudgetsPerPathPrefix(t *testing.T) {
	srv := cfgServer(t)
	proxy, count := cfgPrefixProxy(t, srv)
	l := cfgLimiter(t, 1, time.Hour, new(time.Duration(0)))

	rcA := &rest.Config{Host: proxy.URL + "/k8s/clusters/a"}
	rcB := &rest.Config{Host: proxy.URL + "/k8s/clusters/b"}
	require.NoError(t, l.Configure(rcA))
	require.NoError(t, l.Configure(rcB))
	csA, csB := cfgClientset(t, rcA), cfgClientset(t, rcB)

	require.NoError(t, cfgGet(csA, "x"))
	require.NoError(t, cfgGet(csB, "x"), "b has a budget of its own")

	rleA := harness.RateLimitExceeded(t, cfgGet(csA, "y"))
	rleB := harness.RateLimitExceeded(t, cfgGet(csB, "y"))
	assert.Equal(t, cluster.Key(k8sratelimit.DefaultOwner, cfgAPIServer(t, proxy.URL)+"/k8s/clusters/a"), rleA.Key)
	assert.Equal(t, cluster.Key(k8sratelimit.DefaultOwner, cfgAPIServer(t, proxy.URL)+"/k8s/clusters/b"), rleB.Key)
	assert.Equal(t, 1, count("a"))
	assert.Equal(t, 1, count("b"))
	assert.Len(t, srv.Requests(), 2)
}

// ---------------------------------------------------------------------------
// Configure

// Configuring one rest.Config twice counts each request once.
func TestClientGoConfigureTwiceCountsOnce(t *testing.T) {
	srv := cfgServer(t)
	obs := &harness.Observer{}
	l := cfgLimiter(t, 2, time.Hour, new(time.Duration(0)), k8sratelimit.WithObserver(obs))

	rc := &rest.Config{Host: srv.URL}
	require.NoError(t, l.Configure(rc))
	require.NoError(t, l.Configure(rc))
	require.NoError(t, l.ConfigureCluster("named", rc))
	cs := cfgClientset(t, rc)

	require.NoError(t, cfgGet(cs, "one"))
	assert.Equal(t, int32(1), obs.Admits.Load(), "one request, one slot")
	require.NoError(t, cfgGet(cs, "two"), "the first request took one slot, not two")
	harness.RateLimitExceeded(t, cfgGet(cs, "three"))
	assert.Len(t, srv.Requests(), 2)
}

// Configure keeps a WrapTransport that is already there: it still sees the
// requests the limiter lets through.
func TestClientGoConfigureKeepsExistingWrapper(t *testing.T) {
	srv := cfgServer(t)
	l := cfgLimiter(t, 1, time.Hour, new(time.Duration(0)))

	var counter cfgCounter
	rc := &rest.Config{Host: srv.URL, WrapTransport: counter.wrap}
	require.NoError(t, l.Configure(rc))
	cs := cfgClientset(t, rc)

	require.NoError(t, cfgGet(cs, "one"))
	assert.Equal(t, int32(1), counter.n.Load(), "the existing wrapper saw the request")
	harness.RateLimitExceeded(t, cfgGet(cs, "two")) // the limiter is in place too
	assert.Equal(t, 1, srv.Count("/pods/one"))
}

// Configure turns client-go's own default limiter off, but leaves a QPS or
// RateLimiter the caller chose, and refuses this package's own RateLimiter.
func TestClientGoConfigureQPSRules(t *testing.T) {
	srv := cfgServer(t)

	t.Run("unset: QPS -1", func(t *testing.T) {
		l := cfgLimiter(t, 1000, time.Hour, nil)
		rc := &rest.Config{Host: srv.URL}
		require.NoError(t, l.Configure(rc))
		assert.Equal(t, float32(-1), rc.QPS)
		assert.Nil(t, rc.RateLimiter)

		// client-go's default of 5 QPS with a burst of 10 would take two
		// seconds for these.
		cs := cfgClientset(t, rc)
		start := time.Now()
		for i := range 20 {
			require.NoError(t, cfgGet(cs, fmt.Sprint(i)))
		}
		assert.Less(t, time.Since(start), time.Second, "client-go's default limiter is off")
	})

	t.Run("caller's QPS kept", func(t *testing.T) {
		l := cfgLimiter(t, 1000, time.Hour, nil)
		rc := &rest.Config{Host: srv.URL, QPS: 50, Burst: 100}
		require.NoError(t, l.Configure(rc))
		assert.Equal(t, float32(50), rc.QPS)
		assert.Equal(t, 100, rc.Burst)
	})

	t.Run("caller's RateLimiter kept", func(t *testing.T) {
		l := cfgLimiter(t, 1000, time.Hour, nil)
		rl := flowcontrol.NewTokenBucketRateLimiter(10, 10)
		rc := &rest.Config{Host: srv.URL, RateLimiter: rl}
		require.NoError(t, l.Configure(rc))
		assert.Same(t, rl, rc.RateLimiter)
		assert.Zero(t, rc.QPS)
	})

	t.Run("own RateLimiter refused", func(t *testing.T) {
		l := cfgLimiter(t, 1000, time.Hour, nil)
		rc := &rest.Config{Host: srv.URL}
		rl, err := l.RateLimiter(rc)
		require.NoError(t, err)
		rc.RateLimiter = rl
		assert.Error(t, l.Configure(rc))
		assert.Nil(t, rc.WrapTransport, "nothing was added")
		assert.Zero(t, rc.QPS)
	})
}

// A disabled limiter (the kill switch) leaves every rest.Config exactly as
// it is.
func TestClientGoDisabledLeavesConfigUntouched(t *testing.T) {
	srv := cfgServer(t)
	cfg, err := k8sratelimit.LoadConfig([]string{"KUBERNETES_RATELIMIT_ENABLED=false"})
	require.NoError(t, err)
	l, err := k8sratelimit.New(cfg)
	require.NoError(t, err)
	assert.False(t, l.Enabled())

	rc := &rest.Config{Host: srv.URL, BearerToken: "token", UserAgent: "agent", Timeout: 5 * time.Second}
	before := rest.CopyConfig(rc)
	require.NoError(t, l.Configure(rc))
	require.NoError(t, l.ConfigureCluster("prod", rc))
	assert.Nil(t, rc.WrapTransport)
	assert.Zero(t, rc.QPS)
	assert.Nil(t, rc.RateLimiter)
	assert.True(t, reflect.DeepEqual(before, rc), "rest.Config changed: %+v", rc)

	b, err := l.Budget("prod", rc)
	assert.NoError(t, err)
	assert.Nil(t, b)
	rl, err := l.RateLimiter(rc)
	require.NoError(t, err)
	for range 100 {
		require.True(t, rl.TryAccept())
	}
	assert.NoError(t, l.Close())
}

// Errors name the registered cluster, or the normalised API server.
func TestClientGoClusterNameInErrors(t *testing.T) {
	srvProd, srvOther := cfgServer(t), cfgServer(t)
	l := cfgLimiter(t, 1, time.Hour, new(time.Duration(0)))

	rcProd := &rest.Config{Host: srvProd.URL}
	require.NoError(t, l.ConfigureCluster("prod", rcProd))
	rcOther := &rest.Config{Host: srvOther.URL}
	require.NoError(t, l.Configure(rcOther))

	csProd, csOther := cfgClientset(t, rcProd), cfgClientset(t, rcOther)
	require.NoError(t, cfgGet(csProd, "x"))
	require.NoError(t, cfgGet(csOther, "x"))

	rle := harness.RateLimitExceeded(t, cfgGet(csProd, "y"))
	assert.Equal(t, "prod", rle.Cluster)
	assert.Contains(t, rle.Error(), `"prod"`)

	rle = harness.RateLimitExceeded(t, cfgGet(csOther, "y"))
	assert.Equal(t, srvOther.URL, rle.Cluster, "apisim's URL is already normal: http://127.0.0.1:PORT")
	assert.Equal(t, cfgAPIServer(t, srvOther.URL), rle.Cluster)
}

// Looking a budget up without a name, or taking a RateLimiter on it, does
// not register a name: the registered one stays in errors (Limiter.Budget:
// "registering name for it when name is not empty").
func TestClientGoUnnamedLookupKeepsRegisteredName(t *testing.T) {
	srv := cfgServer(t)
	lookups := []struct {
		name   string
		lookup func(l *k8sratelimit.Limiter, rc *rest.Config) error
	}{
		{"Budget", func(l *k8sratelimit.Limiter, rc *rest.Config) error {
			_, err := l.Budget("", rc)
			return err
		}},
		{"RateLimiter", func(l *k8sratelimit.Limiter, rc *rest.Config) error {
			_, err := l.RateLimiter(rc)
			return err
		}},
	}
	for _, tt := range lookups {
		t.Run(tt.name, func(t *testing.T) {
			srv.Reset()
			l := cfgLimiter(t, 1, time.Hour, new(time.Duration(0)))
			rc := &rest.Config{Host: srv.URL}
			require.NoError(t, l.ConfigureCluster("prod", rc))
			cs := cfgClientset(t, rc)
			require.NoError(t, cfgGet(cs, "x"))
			require.Equal(t, "prod", harness.RateLimitExceeded(t, cfgGet(cs, "y")).Cluster)

			require.NoError(t, tt.lookup(l, rc))
			assert.Equal(t, "prod", harness.RateLimitExceeded(t, cfgGet(cs, "z")).Cluster)
		})
	}
}

// Configuring one rest.Config twice counts each request once, also when a
// wrapper that does not expose what it wraps (no
// utilnet.RoundTripperWrapper) was added in between.
func TestClientGoConfigureTwiceAroundOpaqueWrapper(t *testing.T) {
	srv := cfgServer(t)
	obs := &harness.Observer{}
	l := cfgLimiter(t, 2, time.Hour, new(time.Duration(0)), k8sratelimit.WithObserver(obs))

	var counter cfgCounter
	rc := &rest.Config{Host: srv.URL}
	require.NoError(t, l.Configure(rc))
	rc.Wrap(counter.wrap) // harness.RoundTripFunc does not expose what it wraps
	require.NoError(t, l.Configure(rc))
	cs := cfgClientset(t, rc)

	require.NoError(t, cfgGet(cs, "one"))
	assert.Equal(t, int32(1), counter.n.Load())
	assert.Equal(t, int32(1), obs.Admits.Load(), "one request, one slot")
	assert.NoError(t, cfgGet(cs, "two"), "the first request took one slot, not two")
}

// ---------------------------------------------------------------------------
// The flowcontrol adapter

func TestClientGoRateLimiterAdapter(t *testing.T) {
	srv := cfgServer(t)

	t.Run("TryAccept and QPS", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		l := cfgLimiter(t, 3, 600*time.Millisecond, nil, k8sratelimit.WithClock(fc))
		rl, err := l.RateLimiter(&rest.Config{Host: srv.URL})
		require.NoError(t, err)
		assert.Equal(t, float32(5), rl.QPS())
		for i := range 3 {
			assert.True(t, rl.TryAccept(), "slot %d", i)
		}
		assert.False(t, rl.TryAccept(), "exhausted")
		assert.Zero(t, fc.Waiters(), "TryAccept never waits")
		fc.Step(600 * time.Millisecond)
		assert.True(t, rl.TryAccept(), "the window moved on")
	})

	t.Run("Wait follows the maximum wait", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		l := cfgLimiter(t, 1, 400*time.Millisecond, new(100*time.Millisecond), k8sratelimit.WithClock(fc))
		rl, err := l.RateLimiter(&rest.Config{Host: srv.URL})
		require.NoError(t, err)
		require.NoError(t, rl.Wait(context.Background()))
		rle := harness.RateLimitExceeded(t, rl.Wait(context.Background()))
		assert.Equal(t, 400*time.Millisecond, rle.RetryAfter())
		assert.Equal(t, 100*time.Millisecond, rle.MaxWait)

		// Within the maximum wait, Wait waits for the slot.
		fc.Step(350 * time.Millisecond)
		done := harness.Async(func() error { return rl.Wait(context.Background()) })
		harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "Wait waits")
		harness.Pending(t, done)
		fc.Step(50 * time.Millisecond)
		assert.NoError(t, harness.Result(t, done))
	})

	t.Run("Accept waits beyond the maximum wait", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		l := cfgLimiter(t, 1, 400*time.Millisecond, new(time.Duration(0)), k8sratelimit.WithClock(fc))
		rl, err := l.RateLimiter(&rest.Config{Host: srv.URL})
		require.NoError(t, err)
		rl.Accept()
		done := harness.Async(func() error { rl.Accept(); return nil })
		harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "Accept blocks")
		fc.Step(399 * time.Millisecond)
		harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "Accept still blocks")
		harness.Pending(t, done)
		fc.Step(time.Millisecond)
		assert.NoError(t, harness.Result(t, done))
	})

	t.Run("as rest.Config.RateLimiter", func(t *testing.T) {
		l := cfgLimiter(t, 1, time.Hour, new(time.Duration(0)))
		rc := &rest.Config{Host: srv.URL}
		rl, err := l.RateLimiter(rc)
		require.NoError(t, err)
		rc.RateLimiter = rl
		cs := cfgClientset(t, rc)
		require.NoError(t, cfgGet(cs, "adapter-one"))
		err = cfgGet(cs, "adapter-two")
		harness.RateLimitExceeded(t, err)
		assert.True(t, apierrors.IsTooManyRequests(err))
		assert.Equal(t, 0, srv.Count("/pods/adapter-two"))
	})

	t.Run("Stop releases only its own waiters", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		l := cfgLimiter(t, 1, 400*time.Millisecond, nil, k8sratelimit.WithClock(fc))
		rc := &rest.Config{Host: srv.URL}
		rl1, err := l.RateLimiter(rc)
		require.NoError(t, err)
		rl2, err := l.RateLimiter(rc)
		require.NoError(t, err)

		require.NoError(t, rl1.Wait(context.Background()))
		w1 := harness.Async(func() error { return rl1.Wait(context.Background()) })
		harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "rl1 waits")
		w2 := harness.Async(func() error { return rl2.Wait(context.Background()) })
		harness.Settle(t, func() bool { return fc.Waiters() == 2 }, "rl2 waits")

		rl1.Stop()
		assert.ErrorIs(t, harness.Result(t, w1), rlerrors.ErrClosed)
		harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "only rl1's waiter left")
		harness.Pending(t, w2)

		assert.False(t, rl1.TryAccept())
		assert.ErrorIs(t, rl1.Wait(context.Background()), rlerrors.ErrClosed)
		rl1.Accept() // returns at once
		rl1.Stop()   // idempotent

		// rl2's waiter keeps its own slot, two timespans after the first.
		fc.Step(400 * time.Millisecond)
		harness.Pending(t, w2)
		fc.Step(400 * time.Millisecond)
		assert.NoError(t, harness.Result(t, w2))
	})
}

// ---------------------------------------------------------------------------
// The process default

// These tests change the process default: they must not run in parallel.

func TestClientGoPackageConfigureFromEnvironment(t *testing.T) {
	srv := cfgServer(t)
	t.Cleanup(func() { k8sratelimit.SetDefault(nil) })
	t.Setenv(k8sratelimit.EnvLimit, "3")
	t.Setenv(k8sratelimit.EnvMaxWait, "0")
	k8sratelimit.SetDefault(nil)

	rc := &rest.Config{Host: srv.URL}
	require.NoError(t, k8sratelimit.Configure(rc))
	assert.NotNil(t, rc.WrapTransport)
	assert.Equal(t, float32(-1), rc.QPS)

	d, err := k8sratelimit.Default()
	require.NoError(t, err)
	assert.Equal(t, 3, d.Config().Limit)

	cs := cfgClientset(t, rc)
	for i := range 3 {
		require.NoError(t, cfgGet(cs, fmt.Sprint(i)))
	}
	harness.RateLimitExceeded(t, cfgGet(cs, "fourth"))
	assert.Len(t, srv.Requests(), 3)
}

func TestClientGoPackageConfigureInvalidEnvironment(t *testing.T) {
	srv := cfgServer(t)
	t.Cleanup(func() { k8sratelimit.SetDefault(nil) })
	t.Setenv(k8sratelimit.EnvLimit, "lots")
	k8sratelimit.SetDefault(nil)

	for i := range 2 {
		rc := &rest.Config{Host: srv.URL}
		err := k8sratelimit.Configure(rc)
		var ice *rlerrors.InvalidConfigurationError
		require.ErrorAs(t, err, &ice, "call %d", i)
		assert.Equal(t, k8sratelimit.EnvLimit, ice.Key)
		assert.Equal(t, "lots", ice.Value)
		assert.Nil(t, rc.WrapTransport, "rc untouched")
		assert.Zero(t, rc.QPS)
	}
	d, err := k8sratelimit.Default()
	assert.Nil(t, d)
	var ice *rlerrors.InvalidConfigurationError
	assert.ErrorAs(t, err, &ice)
}

func TestClientGoPackageSetDefault(t *testing.T) {
	srv := cfgServer(t)
	t.Cleanup(func() { k8sratelimit.SetDefault(nil) })
	// An invalid environment shows that the custom limiter is used instead
	// of one built from it.
	t.Setenv(k8sratelimit.EnvLimit, "lots")

	custom := cfgLimiter(t, 1, time.Hour, new(time.Duration(0)))
	k8sratelimit.SetDefault(custom)
	d, err := k8sratelimit.Default()
	require.NoError(t, err)
	assert.Same(t, custom, d)

	rc := &rest.Config{Host: srv.URL}
	require.NoError(t, k8sratelimit.Configure(rc))
	cs := cfgClientset(t, rc)
	require.NoError(t, cfgGet(cs, "one"))
	harness.RateLimitExceeded(t, cfgGet(cs, "two"))

	// SetDefault(nil) forgets it: the next Default reads the environment.
	k8sratelimit.SetDefault(nil)
	_, err = k8sratelimit.Default()
	var ice *rlerrors.InvalidConfigurationError
	assert.ErrorAs(t, err, &ice)
}
