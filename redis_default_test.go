package k8sratelimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// TestRedisDefaultConfigurationSendsTheWholeWindow: the default
// configuration (400 a minute, window, adaptive seats) through Redis, with
// many goroutines that wait as long as it takes: a request waits only
// when the budget is full, so the whole first window reaches the server
// at once, and no more. Counted at the server.
func TestRedisDefaultConfigurationSendsTheWholeWindow(t *testing.T) {
	for _, workers := range []int{100, 450} {
		srv := redistest.Start(t)
		api := apisim.New()
		t.Cleanup(api.Close)
		cfg := k8sratelimit.DefaultConfig()
		cfg.Store = "redis"
		cfg.RedisURL = k8sratelimit.NewSecretURL(srv.URL())
		cfg.Owner = "default-config-test"
		cs, lim := limitedClientset(t, cfg, api)

		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					if _, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
						return // the limiter is closed
					}
				}
			})
		}
		// The first window fills in well under a second when every
		// request is sent; the rest wait for the next one, a minute on.
		within := 5 * time.Second
		deadline := time.Now().Add(within)
		for api.Count("/api/v1/namespaces") < cfg.Limit-10 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		require.GreaterOrEqual(t, api.Count("/api/v1/namespaces"), cfg.Limit-10,
			"%d workers: requests of the %d a minute that reached the server within %v", workers, cfg.Limit, within)
		time.Sleep(500 * time.Millisecond) // an integration test on a real clock: would more arrive?
		require.NoError(t, lim.Close())
		wg.Wait()
		assert.LessOrEqual(t, api.MaxInWindow(cfg.Timespan*99/100), cfg.Limit, "%d workers: the most received within a rolling minute", workers)
	}
}
