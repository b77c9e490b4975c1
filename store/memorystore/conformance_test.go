package memorystore_test

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
	"github.com/k8sratelimit/k8sratelimit/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		c := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		return storetest.Harness{
			Store:   memorystore.New(c),
			Advance: func(d time.Duration) { c.SetTime(c.Now().Add(d)) },
		}
	})
}
