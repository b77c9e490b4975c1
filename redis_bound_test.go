package k8sratelimit_test

// A frozen Redis (SIGSTOP) neither answers nor refuses: every call to it
// lasts until the store's timeout (500 ms by default). These tests check
// that a request never waits for it past its own max wait or deadline:
// the failure policy decides it sooner, and what it sends reaches the
// API server.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	k8sratelimit "github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/childproc"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// boundTolerance is how much later than its max wait or deadline a
// request may return: well under the store's 500 ms timeout.
const boundTolerance = 150 * time.Millisecond

// frozenRedisClient returns a clientset against a fresh simulated API
// server, limited through a Redis store (default timeout and failure
// policy) with the extra environment env, once a first request went
// through a healthy Redis; Redis is frozen when it returns.
func frozenRedisClient(t *testing.T, env ...string) (*kubernetes.Clientset, *apisim.Server) {
	t.Helper()
	srv := redistest.Start(t)
	t.Cleanup(srv.Resume) // before the server is stopped
	api := apisim.New()
	t.Cleanup(api.Close)
	env = append(append([]string{"KUBERNETES_RATELIMIT=1000", "KUBERNETES_RATELIMIT_TIMESPAN=second"},
		childproc.RedisBudget(srv.URL(), "bound-test")...), env...)
	cfg, err := k8sratelimit.LoadConfig(env)
	require.NoError(t, err)
	lim, err := k8sratelimit.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	rc := &rest.Config{Host: api.URL}
	require.NoError(t, lim.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err, "a request through a healthy Redis")
	srv.Pause()
	return cs, api
}

// timedList lists namespaces with ctx and returns how long it took and
// whether it succeeded.
func timedList(cs *kubernetes.Clientset, ctx context.Context) (time.Duration, error) {
	start := time.Now()
	_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	return time.Since(start), err
}

func TestFrozenRedisNeverHoldsARequestPastItsMaxWait(t *testing.T) {
	for _, maxWait := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run(maxWait.String(), func(t *testing.T) {
			cs, api := frozenRedisClient(t, "KUBERNETES_RATELIMIT_MAX_WAIT="+maxWait.String())
			before := api.Count("/api/v1/namespaces")
			sent := 0
			for i := range 5 {
				took, err := timedList(cs, context.Background())
				assert.LessOrEqual(t, took, maxWait+boundTolerance, "request %d (error: %v)", i, err)
				if err == nil {
					sent++
				}
			}
			assert.Equal(t, 5, sent, "the local failure policy sends them")
			assert.Equal(t, sent, api.Count("/api/v1/namespaces")-before, "what returned sent reached the API server")
		})
	}
}

func TestFrozenRedisNeverHoldsARequestPastItsDeadline(t *testing.T) {
	cs, _ := frozenRedisClient(t)
	const deadline = 200 * time.Millisecond
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		took, err := timedList(cs, ctx)
		cancel()
		assert.LessOrEqual(t, took, deadline+boundTolerance, "request %d (error: %v)", i, err)
	}
}
