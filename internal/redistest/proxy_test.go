package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// TestProxy checks the proxy's three states on a real redis-server:
// forwarding, replies held back by a delay, and a dropped link that
// refuses connections until restored.
func TestProxy(t *testing.T) {
	srv := redistest.Start(t)
	p := redistest.StartProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	ping := func() (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		from := time.Now()
		err := c.Ping(cctx).Err()
		return time.Since(from), err
	}

	took, err := ping()
	require.NoError(t, err, "forwards")
	assert.Less(t, took, 100*time.Millisecond)

	const delay = 150 * time.Millisecond
	p.SetDelay(delay)
	took, err = ping()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, took, delay, "a reply is held back by the delay")
	p.SetDelay(0)

	p.Drop()
	_, err = ping()
	assert.Error(t, err, "a dropped link fails calls")
	_, err = ping()
	assert.Error(t, err, "and refuses new connections")

	p.Restore()
	took, err = ping()
	require.NoError(t, err, "a restored link forwards again")
	assert.Less(t, took, 100*time.Millisecond)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	got, err := srv.Client().Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got, "commands reach the server")
}
