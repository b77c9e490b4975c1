package store_test

import (
	"context"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// A request that has to wait holds a reservation: its caller sleeps for
// Wait, then confirms, and sends when Confirm answers 0.
func Example() {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var s store.Store = memorystore.New(clk)
	ctx := context.Background()
	key := "k8s:default:api.example.com"
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: time.Second}
	anyWait := store.Request{MaxWait: store.NoMaxWait}

	first, _ := s.Reserve(ctx, key, p, anyWait)
	second, _ := s.Reserve(ctx, key, p, anyWait)
	fmt.Println(first.Wait, second.Wait, second.ID != 0)

	clk.SetTime(clk.Now().Add(second.Wait))
	left, _ := s.Confirm(ctx, key, second.ID)
	fmt.Println(left)
	// Output:
	// 0s 1s true
	// 0s
}
