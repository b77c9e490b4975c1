package memorystore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// A deferred reservation admitted at once whose request left later (it
// waited for a seat) counts where it left: the reservation its send
// crowds moves later, as a late Confirm would move it.
func TestSentCountsWhereTheRequestLeft(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memorystore.New(clk)
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 2, Timespan: 10 * time.Second}
	anyWait := store.Request{MaxWait: store.NoMaxWait}

	a, err := s.Reserve(ctx, "k", p, store.Request{MaxWait: store.NoMaxWait, Deferred: true})
	require.NoError(t, err)
	require.NotZero(t, a.ID)
	clk.SetTime(clk.Now().Add(time.Second))
	_, err = s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	c, err := s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.Equal(t, 9*time.Second, c.Wait, "the deferred reservation counts from 0s until its request leaves")

	clk.SetTime(clk.Now().Add(2 * time.Second)) // it leaves at 3s
	s.Sent("k", a.ID)
	left, err := s.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	assert.Equal(t, 8*time.Second, left, "the window's sends are at 1s and 3s: the next comes at 11s")
	_, err = s.Confirm(ctx, "k", a.ID)
	assert.ErrorIs(t, err, store.ErrUnknownReservation, "a sent reservation is spent")
	s.Sent("k", a.ID) // once more, and of a key never used: nothing happens
	s.Sent("other", 1)
}
