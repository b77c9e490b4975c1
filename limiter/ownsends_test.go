package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// amnesiac is a shared store that forgets every budget whenever forget is
// called, as a Redis restarted without its data does.
type amnesiac struct {
	clk *clocktesting.FakeClock
	*memorystore.Store
}

func (a *amnesiac) forget() { a.Store = memorystore.New(a.clk) }

// It shares budgets with other processes, as far as the engine can tell.
func (a *amnesiac) SeatShare(string, int) (int, int)              { return 0, 0 }
func (a *amnesiac) ShareWait(string) time.Duration                { return 0 }
func (a *amnesiac) ShareCut(string, store.SeatCut)                {}
func (a *amnesiac) OnCut(string, func(store.SeatCut))             {}
func (a *amnesiac) ReportSeats(string, func() (limit, inUse int)) {}

var _ store.SeatSharer = (*amnesiac)(nil)

func setupAmnesiac(t *testing.T, p store.Policy, opts limiter.Options) (*limiter.Budget, *amnesiac) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	a := &amnesiac{clk: clk, Store: memorystore.New(clk)}
	opts.Policy, opts.Clock = p, clk
	l := limiter.New(a, opts)
	t.Cleanup(func() { l.Close() })
	return l.Budget(key, "test"), a
}

func TestOwnSendsHoldTheLimitWhenTheSharedStoreForgets(t *testing.T) {
	for _, c := range []struct {
		p    store.Policy
		wait time.Duration // until the fourth request fits among the process's own sends
	}{
		{window(3, 10*time.Second), 10 * time.Second},
		{store.Policy{Strategy: store.StrategyLinear, Limit: 5, Timespan: 10 * time.Second, Burst: 3}, 2 * time.Second},
	} {
		p := c.p
		t.Run(string(p.Strategy), func(t *testing.T) {
			b, a := setupAmnesiac(t, p, limiter.Options{})
			ctx := context.Background()
			for range 3 {
				require.NoError(t, b.Wait(ctx))
			}
			a.forget() // the store would now admit three more at once

			done := waitAsync(ctx, b)
			untilWaiting(t, a.clk, 1)
			a.clk.Step(c.wait - time.Millisecond)
			harness.Pending(t, done)
			a.clk.Step(time.Millisecond)
			assert.NoError(t, harness.Result(t, done), "sent once the process's own sends leave room")
		})
	}
}

func TestOwnSendsRefuseBeyondTheMaxWait(t *testing.T) {
	b, a := setupAmnesiac(t, window(2, 10*time.Second), limiter.Options{MaxWait: new(4 * time.Second)})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))
	a.clk.Step(5 * time.Second)
	require.NoError(t, b.Wait(ctx))
	a.forget()

	err := b.Wait(ctx)
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle, "the own slot is 5s away, beyond the max wait")
	assert.Equal(t, 5*time.Second, rle.RetryAfter())
	assert.Zero(t, a.clk.Waiters(), "decided before sleeping")

	a.clk.Step(5 * time.Second)
	assert.NoError(t, b.Wait(ctx), "within the max wait once the first send is a timespan old")
}

func TestOwnSendsAreNotKeptWithAnInProcessStore(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{})
	require.NoError(t, b.Wait(context.Background()))
	assert.Zero(t, clk.Waiters())
}
