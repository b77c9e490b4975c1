package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// BudgetStatus is the state of one budget in a shared store.
type BudgetStatus struct {
	Key      string
	Strategy Strategy
	Limit    int
	Timespan time.Duration
	// Used is the number of sends in the last timespan (window only).
	Used int
	// Waiting is the number of reservations still ahead.
	Waiting int
	// Processes is the number of processes sharing the budget.
	Processes int
	// Cooldown is the cooldown left.
	Cooldown time.Duration
	// SeatLimit is the budget's concurrency limit, for all its processes
	// together, as they last reported it (every presence interval); 0 when
	// none reports one.
	SeatLimit int
	// SeatsInUse is the seats the processes held when they last reported.
	SeatsInUse int
}

// Budgets returns the state of every budget in Redis, sorted by key. With
// Redis Cluster it scans every primary.
func (s *Redis) Budgets(ctx context.Context) ([]BudgetStatus, error) {
	var mu sync.Mutex
	var out []BudgetStatus
	ctx = s.logCtx(ctx)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, "{k8s:*}:m", 1000).Iterator()
		for it.Next(ctx) {
			m := it.Val()
			key := strings.TrimSuffix(strings.TrimPrefix(m, "{"), "}:m")
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
	slices.SortFunc(out, func(a, b BudgetStatus) int { return strings.Compare(a.Key, b.Key) })
	return out, err
}

func (s *Redis) status(ctx context.Context, keys []string) (BudgetStatus, error) {
	ctx, cancel := context.WithTimeout(s.logCtx(ctx), s.opts.Timeout)
	defer cancel()
	return s.statusOn(ctx, s.client, keys)
}

func (s *Redis) statusOn(ctx context.Context, c redis.Scripter, keys []string) (BudgetStatus, error) {
	v, err := scriptStatus.Run(ctx, c, keys, s.offset.Load(), "1", s.proc, µs(s.ttl), 1, "0").Result()
	if err != nil {
		return BudgetStatus{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 9 {
		return BudgetStatus{}, fmt.Errorf("store: unexpected status reply %v", v)
	}
	n := func(i int) int64 { x, _ := a[i].(int64); return x }
	strategy, _ := a[6].(string)
	return BudgetStatus{
		Strategy:  Strategy(strategy),
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
