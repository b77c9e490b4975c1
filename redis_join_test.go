package k8sratelimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// limitedClientset returns a clientset for api through a new limiter of
// cfg with opts, closed when the test ends, and the limiter.
func limitedClientset(t *testing.T, cfg k8sratelimit.Config, api *apisim.Server, opts ...k8sratelimit.Option) (kubernetes.Interface, *k8sratelimit.Limiter) {
	t.Helper()
	lim, err := k8sratelimit.New(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	rc := &rest.Config{Host: api.URL}
	require.NoError(t, lim.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs, lim
}

// joinClientset returns a clientset for api through a limiter of cfg whose
// Redis store is its own, as another process's would be.
func joinClientset(t *testing.T, cfg k8sratelimit.Config, api *apisim.Server) kubernetes.Interface {
	t.Helper()
	rs, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rs.Close() }) // after the limiter's Close: cleanups run last first
	cs, _ := limitedClientset(t, cfg, api, k8sratelimit.WithStore(rs))
	return cs
}

// A process that joins others on a budget holds no seat until they have
// made room for it (SPEC §13: together they never hold more seats than
// the limit). A request of it that may not wait is refused then, saying
// it waits for a seat and how long: retried after that, it is sent.
// Counted at the server.
func TestRedisNewcomerThatMayNotWaitIsToldItsSeatWait(t *testing.T) {
	srv := redistest.Start(t)
	api := apisim.New()
	t.Cleanup(api.Close)
	cfg := k8sratelimit.DefaultConfig()
	cfg.Store = "redis"
	cfg.RedisURL = k8sratelimit.NewSecretURL(srv.URL())
	cfg.Owner = "join-test"

	first := joinClientset(t, cfg, api)
	for range 5 {
		_, err := first.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err, "the first process, alone on the budget")
	}

	never := time.Duration(0)
	cfg.MaxWait = &never
	newcomer := joinClientset(t, cfg, api)
	var sent bool
	for try := 0; try < 5 && !sent; try++ {
		_, err := newcomer.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
		if err == nil {
			sent = true
			break
		}
		var rle *rlerrors.RateLimitExceededError
		require.True(t, errors.As(err, &rle), "a refusal of the limiter: %v", err)
		assert.Equal(t, rlerrors.WaitingForSeat, rle.WaitingFor, "it waits for a seat, not a rate slot: %v", err)
		assert.Contains(t, err.Error(), "waiting for a seat")
		require.LessOrEqual(t, rle.RetryAfter(), time.Second, "the join's wait, not a rate slot's")
		time.Sleep(rle.RetryAfter()) // a caller honouring RetryAfter
	}
	require.True(t, sent, "the newcomer's request is sent once it has made its join")
	assert.Equal(t, 1, api.Count("/api/v1/namespaces/default/pods"), "the newcomer's request reached the server once")
}
