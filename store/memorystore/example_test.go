package memorystore_test

import (
	"context"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

func Example() {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := memorystore.New(clk)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 2, Timespan: 10 * time.Second}
	anyWait := store.Request{MaxWait: store.NoMaxWait}

	for range 4 {
		res, _ := m.Reserve(ctx, "k8s:default:api.example.com", p, anyWait)
		fmt.Println(res.OK, res.Wait)
	}
	res, _ := m.Reserve(ctx, "k8s:default:api.example.com", p, store.Request{MaxWait: 15 * time.Second})
	fmt.Println(res.OK, res.Wait)
	// Output:
	// true 0s
	// true 0s
	// true 10s
	// true 10s
	// false 20s
}
