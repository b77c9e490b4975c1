package k8sratelimit_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// BenchmarkSeatsSharedThroughRedis is what Redis does for requests that
// wait for seats shared through it: two limiters, each with its own store
// as two processes have, 20 workers each, over a simulated priority level
// of 3 seats that serves a request in 2ms, the rate budget far above it.
// It reports, per request served, the functions Redis ran
// (functions/op) and the CPU time it used (redis-cpu-µs/op); ns/op is
// the level's, not the limiter's.
//
//	go test -run '^$' -bench SeatsSharedThroughRedis -benchtime 5000x .
func BenchmarkSeatsSharedThroughRedis(b *testing.B) {
	srv := redistest.Start(b)
	api := apisim.New()
	b.Cleanup(api.Close)
	api.SetCapacity(3, 0, 2*time.Millisecond)
	var clients []*kubernetes.Clientset
	for range 2 {
		cfg := k8sratelimit.DefaultConfig()
		cfg.Limit, cfg.Timespan = k8sratelimit.MaxWindowLimit, time.Second
		cfg.Store, cfg.RedisURL, cfg.Owner = k8sratelimit.StoreRedis, k8sratelimit.NewSecretURL(srv.URL()), "bench"
		l, err := k8sratelimit.New(cfg)
		require.NoError(b, err)
		b.Cleanup(func() { _ = l.Close() })
		for range 20 {
			rc := &rest.Config{Host: api.URL, QPS: -1}
			require.NoError(b, l.Configure(rc))
			cs, err := kubernetes.NewForConfig(rc)
			require.NoError(b, err)
			clients = append(clients, cs)
		}
	}
	ctx := b.Context()
	require.NoError(b, srv.ResetStats(ctx))
	cpu, err := srv.CPU(ctx)
	require.NoError(b, err)
	b.ResetTimer()
	left := atomic.Int64{}
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	for _, cs := range clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
					left.Add(1) // not served: once more
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after, err := srv.CPU(ctx)
	require.NoError(b, err)
	calls, _, err := srv.FunctionCalls(ctx)
	require.NoError(b, err)
	b.ReportMetric(float64(calls)/float64(b.N), "functions/op")
	b.ReportMetric(float64((after-cpu).Microseconds())/float64(b.N), "redis-cpu-µs/op")
}
