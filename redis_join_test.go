package k8sratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// joinClientset returns a clientset for api through a limiter of cfg whose
// Redis store is its own, as another process's would be.
func joinClientset(t *testing.T, cfg k8sratelimit.Config, api *apisim.Server) kubernetes.Interface {
	t.Helper()
	rs, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{})
	require.NoError(t, err)
	lim, err := k8sratelimit.New(cfg, k8sratelimit.WithStore(rs))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close(); _ = rs.Close() })
	rc := &rest.Config{Host: api.URL}
	require.NoError(t, lim.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs
}

// A process that joins a budget with room sends its first request at
// once, also when it may not wait at all: joining others costs it no
// wait. Counted at the server.
func TestRedisNewcomerWithRoomSendsAtOnce(t *testing.T) {
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
	_, err := newcomer.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "the newcomer's first request, with room in the budget")

	var at []time.Time
	for _, r := range api.Requests() {
		if r.Path == "/api/v1/namespaces/default/pods" {
			at = append(at, r.At)
		}
	}
	assert.Len(t, at, 1, "the newcomer's request reached the server")
}
