package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

func TestRedisEntriesAtOneInstantSortInTheOrderReserved(t *testing.T) {
	client, s := startStore(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 100, Timespan: 10 * time.Second}
	// During a cooldown every reservation takes the cooldown's end: 40 of
	// them, enough for the IDs to pass from one base-36 digit to two.
	_, err := s.SetCooldown(ctx, "k", p, 5*time.Second)
	require.NoError(t, err)
	var want []string
	for range 40 {
		res, err := s.Reserve(ctx, "k", p, anyWait)
		require.NoError(t, err)
		require.NotZero(t, res.ID)
		want = append(want, redisstore.Member(s, "k", res.ID))
	}
	got, err := client.ZRangeByScore(ctx, "{k}:v1:w", &redis.ZRangeBy{Min: "(0", Max: "+inf"}).Result()
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
