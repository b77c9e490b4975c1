package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// A request let go by a slow round trip leaves a reply's delay after
// Redis recorded it: its send is recorded again where it left, and the
// reservation another process made a timespan after the first record
// moves later with it.
func TestSlowRoundTripRecordsTheSendWhereItLeft(t *testing.T) {
	const delay = 80 * time.Millisecond
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	farClient := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = farClient.Close() })
	far := redisstore.New(farClient, redisstore.Options{})
	near := redisstore.New(srv.Client(), redisstore.Options{})
	t.Cleanup(func() { _ = far.Close(); _ = near.Close() })
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: time.Second}
	// The library loaded and a connection made before the link slows.
	_, err := far.Reserve(ctx, "k8s:default:warm", p, store.Request{})
	require.NoError(t, err)

	proxy.SetDelay(delay)
	const key = "k8s:default:slow"
	res, err := far.Reserve(ctx, key, p, store.Request{})
	require.NoError(t, err)
	require.True(t, res.OK && res.Wait == 0, "the first request goes at once: %+v", res)
	reserved := time.Now()
	next, err := near.Reserve(ctx, key, p, store.Request{MaxWait: store.NoMaxWait})
	require.NoError(t, err)
	require.Positive(t, next.Wait, "the second waits a timespan after the first's record")

	redisstore.FlushSent(far)
	left, err := near.Confirm(ctx, key, next.ID)
	require.NoError(t, err)
	moved := left - (next.Wait - time.Since(reserved))
	assert.GreaterOrEqual(t, moved, delay/2,
		"the second's slot moved with the first's send, recorded where it left (%v later), not where Redis decided it", delay)
	assert.LessOrEqual(t, moved, 3*delay, "and no further than that")
}
