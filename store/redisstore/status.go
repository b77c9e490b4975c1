package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// Status returns the state of every budget in Redis, sorted by key. With
// Redis Cluster it scans every primary.
func (s *Store) Status(ctx context.Context) ([]store.BudgetStatus, error) {
	var mu sync.Mutex
	var out []store.BudgetStatus
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, "{k8s:*}:"+layout+":m", 1000).Iterator()
		for it.Next(ctx) {
			m := it.Val()
			key := strings.TrimSuffix(strings.TrimPrefix(m, "{"), "}:"+layout+":m")
			st, err := s.statusOn(ctx, c, redisKeys(key))
			if err != nil {
				return err
			}
			st.Key = key
			mu.Lock()
			out = append(out, st)
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	slices.SortFunc(out, func(a, b store.BudgetStatus) int { return strings.Compare(a.Key, b.Key) })
	return out, err
}

func (s *Store) status(ctx context.Context, keys []string) (store.BudgetStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.statusOn(ctx, s.client, keys)
}

func (s *Store) statusOn(ctx context.Context, c redis.Cmdable, keys []string) (store.BudgetStatus, error) {
	v, err := s.run(ctx, c, scriptStatus, keys, s.argsHere(store.Policy{Strategy: store.StrategyWindow, Timespan: time.Microsecond}, hereNot, 0)...).Result()
	if err != nil {
		return store.BudgetStatus{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 9 {
		return store.BudgetStatus{}, fmt.Errorf("store: unexpected status reply %v", v)
	}
	n := func(i int) int64 { x, _ := a[i].(int64); return x }
	strategy, _ := a[6].(string)
	return store.BudgetStatus{
		Strategy:  store.Strategy(strategy),
		Limit:     int(n(4)),
		Timespan:  time.Duration(n(5)) * time.Microsecond,
		Used:      int(n(3)),
		Waiting:   int(n(2)),
		Processes: int(n(1)),
		Cooldown:  time.Duration(n(0)) * time.Microsecond,

		SeatLimit:  int(n(7)),
		SeatsInUse: int(n(8)),
	}, nil
}
