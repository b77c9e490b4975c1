package k8sratelimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// With STORE_FAILURE=closed and Redis down, a typed clientset call fails
// with an error that says when to try again (a worker honouring it does
// not spin) and still wraps the Redis error, through client-go's
// wrapping. Nothing reaches the API server.
func TestRedisClosedRefusalCarriesRetryAfterThroughClientGo(t *testing.T) {
	redisSrv := redistest.Start(t)
	api := apisim.New()
	defer api.Close()

	cfg, err := k8sratelimit.LoadConfig([]string{
		"KUBERNETES_RATELIMIT_STORE=redis",
		"KUBERNETES_RATELIMIT_STORE_FAILURE=closed",
		"KUBERNETES_RATELIMIT_OWNER=closed-test",
		"KUBERNETES_RATELIMIT_REDIS_URL=" + redisSrv.URL(),
	})
	require.NoError(t, err)
	cs, _ := limitedClientset(t, cfg, api)

	redisSrv.Kill()
	for range 3 {
		_, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		require.Error(t, err)
		var hasRetryAfter rlerrors.HasRetryAfter
		require.ErrorAs(t, err, &hasRetryAfter, "the refusal says when to retry: %v", err)
		assert.GreaterOrEqual(t, hasRetryAfter.RetryAfter(), 100*time.Millisecond)
		assert.LessOrEqual(t, hasRetryAfter.RetryAfter(), time.Second, "no later than the store's next probe")
		var opErr *net.OpError
		assert.True(t, errors.As(err, &opErr) || errors.Is(err, io.EOF),
			"the Redis error is still wrapped (a dial error, or EOF on a pooled connection): %v", err)
	}
	assert.Empty(t, api.Requests(), "a refused request is not sent")
}
