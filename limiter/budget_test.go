package limiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

const key = "k8s:default:api.example.com"

// setup returns a budget on a fake clock whose store reads the same clock.
func setup(t *testing.T, p store.Policy, opts limiter.Options) (*limiter.Budget, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	opts.Policy, opts.Clock = p, clk
	l := limiter.New(memorystore.New(clk), opts)
	t.Cleanup(func() { l.Close() })
	return l.Budget(key, "test"), clk
}

func window(limit int, span time.Duration) store.Policy {
	return store.Policy{Strategy: store.StrategyWindow, Limit: limit, Timespan: span}
}

// waitAsync calls b.Wait(ctx) on a goroutine and returns its result.
func waitAsync(ctx context.Context, b *limiter.Budget) <-chan error {
	return harness.Async(func() error { return b.Wait(ctx) })
}

// untilWaiting blocks until n timers are set on the fake clock: the
// waiters have decided and gone to sleep.
func untilWaiting(t *testing.T, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return clk.Waiters() >= n }, 5*time.Second, time.Millisecond, "waiting for %d sleeping requests", n)
}

func TestWaitAdmitsThenDefers(t *testing.T) {
	b, clk := setup(t, window(2, 10*time.Second), limiter.Options{})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))
	require.NoError(t, b.Wait(ctx))
	assert.Zero(t, clk.Waiters(), "requests with room are admitted without a timer")

	done := waitAsync(ctx, b)
	untilWaiting(t, clk, 1)
	clk.Step(9 * time.Second)
	harness.Pending(t, done)
	clk.Step(time.Second)
	assert.NoError(t, harness.Result(t, done))
}

func TestMaxWaitFailsAtOnceAndReservesNothing(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{MaxWait: new(5 * time.Second)})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))

	err := b.Wait(ctx)
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, "test", rle.Cluster)
	assert.Equal(t, key, rle.Key)
	assert.Equal(t, 10*time.Second, rle.RetryAfter())
	assert.Equal(t, 5*time.Second, rle.MaxWait)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
	assert.Zero(t, clk.Waiters(), "the refusal was decided before sleeping")

	// The refused request reserved nothing: the next one gets the slot at 10s.
	done := waitAsync(k8sratelimit.WithMaxWait(ctx, 10*time.Second), b)
	untilWaiting(t, clk, 1)
	clk.Step(10 * time.Second)
	assert.NoError(t, harness.Result(t, done))
}

func TestMaxWaitZeroNeverWaits(t *testing.T) {
	b, _ := setup(t, window(1, time.Minute), limiter.Options{MaxWait: new(time.Duration(0))})
	require.NoError(t, b.Wait(context.Background()))
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, b.Wait(context.Background()), &rle)
	assert.Equal(t, time.Minute, rle.RetryAfter())
}

func TestDeadlineBeforeSlotFailsAtOnce(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{})
	require.NoError(t, b.Wait(context.Background()))

	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(3*time.Second))
	defer cancel()
	err := b.Wait(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, 10*time.Second, rle.RetryAfter())
	assert.Zero(t, clk.Waiters())
}

func TestWithMaxWaitOverrides(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{MaxWait: new(time.Second)})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))

	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, b.Wait(k8sratelimit.WithMaxWait(ctx, 0)), &rle)

	done := waitAsync(k8sratelimit.WithMaxWait(ctx, time.Minute), b)
	untilWaiting(t, clk, 1)
	clk.Step(10 * time.Second)
	assert.NoError(t, harness.Result(t, done), "a longer per-request max wait lets it wait")
}

func TestCancelReleasesSlotForNextCaller(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{})
	require.NoError(t, b.Wait(context.Background()))

	ctx, cancel := context.WithCancel(context.Background())
	first := waitAsync(ctx, b)
	untilWaiting(t, clk, 1)
	cancel()
	assert.ErrorIs(t, harness.Result(t, first), context.Canceled)

	second := waitAsync(context.Background(), b)
	untilWaiting(t, clk, 1)
	clk.Step(10 * time.Second)
	assert.NoError(t, harness.Result(t, second), "the newcomer took the freed slot at 10s, not 20s")
}

func TestCooldownMovesWaiters(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))
	done := waitAsync(ctx, b)
	untilWaiting(t, clk, 1)

	left, err := b.SetCooldown(ctx, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, left)
	untilWaiting(t, clk, 1)
	clk.Step(10 * time.Second)
	harness.Pending(t, done)
	untilWaiting(t, clk, 1)
	clk.Step(20 * time.Second)
	assert.NoError(t, harness.Result(t, done))
}

func TestCooldownBeyondMaxWaitFailsWaitersAtOnce(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{MaxWait: new(15 * time.Second)})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))
	done := waitAsync(ctx, b)
	untilWaiting(t, clk, 1)

	_, err := b.SetCooldown(ctx, time.Minute)
	require.NoError(t, err)
	err = harness.Result(t, done)
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle, "the waiter learns of the cooldown at once, without its timer firing")
	assert.Equal(t, time.Minute, rle.RetryAfter(), "RetryAfter is its new wait")

	// Its slot was released: nothing is reserved after the cooldown.
	err = b.Wait(k8sratelimit.WithMaxWait(ctx, 0))
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, time.Minute, rle.RetryAfter())
}

func TestCloseWakesWaitersWithErrClosed(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	l := limiter.New(memorystore.New(clk), limiter.Options{Policy: window(1, time.Hour), Clock: clk})
	b := l.Budget(key, "test")
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))
	waiters := []<-chan error{waitAsync(ctx, b), waitAsync(ctx, b), waitAsync(ctx, b)}
	untilWaiting(t, clk, 3)

	require.NoError(t, l.Close())
	for _, w := range waiters {
		assert.ErrorIs(t, harness.Result(t, w), rlerrors.ErrClosed)
	}
	assert.ErrorIs(t, b.Wait(ctx), rlerrors.ErrClosed)
	require.NoError(t, l.Close(), "Close is idempotent")
}

func TestJitterOnlyForDeferred(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), limiter.Options{Jitter: 5 * time.Second})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))
	assert.Zero(t, clk.Waiters(), "an immediate admission gets no jitter")

	done := waitAsync(ctx, b)
	untilWaiting(t, clk, 1)
	clk.Step(10*time.Second - time.Nanosecond)
	harness.Pending(t, done)
	clk.Step(5*time.Second + time.Nanosecond)
	assert.NoError(t, harness.Result(t, done), "jitter is at most 5s")
}

type events struct {
	admitted, deferred, rejected int
}

type countingObserver struct {
	limiter.NopObserver
	e *events
}

func (o countingObserver) Admitted(_, _ string, _ limiter.Class, wait time.Duration, _ limiter.WaitReason) {
	if wait == 0 {
		o.e.admitted++
	} else {
		o.e.deferred++
	}
}
func (o countingObserver) Rejected(string, string, limiter.Class, time.Duration) { o.e.rejected++ }

func TestSlowWaitIsLoggedOncePerSecond(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	var ev events
	b, clk := setup(t, window(1, 2*time.Second), limiter.Options{Logger: log, Observer: countingObserver{e: &ev}})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))

	first := waitAsync(ctx, b)
	untilWaiting(t, clk, 1)
	clk.Step(2 * time.Second)
	require.NoError(t, harness.Result(t, first))
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], `"budget"="`+key+`"`)
	assert.Contains(t, lines[0], `"reason"="client-side budget"`)
	assert.Contains(t, lines[0], `"cluster"="test"`)

	second := waitAsync(k8sratelimit.WithMaxWait(ctx, time.Hour), b)
	untilWaiting(t, clk, 1)
	clk.Step(2 * time.Second)
	require.NoError(t, harness.Result(t, second))
	assert.Len(t, lines, 2, "a second slow wait 2s later is logged")

	assert.Equal(t, events{admitted: 1, deferred: 2}, ev)
}

func TestSlowWaitsWithinASecondAreLoggedOnce(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	b, clk := setup(t, window(2, 2*time.Second), limiter.Options{Logger: log})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx))
	require.NoError(t, b.Wait(ctx))

	first, second := waitAsync(ctx, b), waitAsync(ctx, b)
	untilWaiting(t, clk, 2)
	clk.Step(2 * time.Second)
	require.NoError(t, harness.Result(t, first))
	require.NoError(t, harness.Result(t, second))
	assert.Len(t, lines, 1)
}

func TestCooldownWaitIsLoggedWithItsReason(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	b, clk := setup(t, window(100, time.Minute), limiter.Options{Logger: log})
	ctx := context.Background()
	_, err := b.SetCooldown(ctx, 3*time.Second)
	require.NoError(t, err)

	done := waitAsync(ctx, b)
	untilWaiting(t, clk, 1)
	clk.Step(3 * time.Second)
	require.NoError(t, harness.Result(t, done))
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], `"reason"="server cooldown"`)
}

// jitterStore records the jitter each Reserve is given.
type jitterStore struct {
	store.Store
	mu      sync.Mutex
	jitters []time.Duration
}

func (s *jitterStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	s.mu.Lock()
	s.jitters = append(s.jitters, r.Jitter)
	s.mu.Unlock()
	return s.Store.Reserve(ctx, key, p, r)
}

func TestConfiguredJitterReachesTheStore(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	js := &jitterStore{Store: memorystore.New(clk)}
	l := limiter.New(js, limiter.Options{Policy: window(1, time.Hour), Clock: clk, Jitter: 5 * time.Second, MaxWait: new(time.Duration(0))})
	t.Cleanup(func() { l.Close() })
	b := l.Budget(key, "test")
	for range 20 {
		_ = b.Wait(context.Background())
	}
	js.mu.Lock()
	defer js.mu.Unlock()
	require.Len(t, js.jitters, 20)
	positive := 0
	for _, j := range js.jitters {
		assert.GreaterOrEqual(t, j, time.Duration(0))
		assert.LessOrEqual(t, j, 5*time.Second)
		if j > 0 {
			positive++
		}
	}
	assert.Positive(t, positive, "a jitter of up to 5s is drawn for every request (0 every time is a broken draw)")
}

// reasonObserver records the reason of each admission.
type reasonObserver struct {
	limiter.NopObserver
	mu      sync.Mutex
	reasons []limiter.WaitReason
}

func (o *reasonObserver) Admitted(_, _ string, _ limiter.Class, _ time.Duration, r limiter.WaitReason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reasons = append(o.reasons, r)
}

func TestSlotMovedByALateSendIsNotACooldown(t *testing.T) {
	obs := &reasonObserver{}
	b, clk := setup(t, window(1, time.Second), limiter.Options{Observer: obs})
	ctx := context.Background()
	require.NoError(t, b.Wait(ctx)) // at 0
	second := waitAsync(ctx, b)     // slot at 1s
	untilWaiting(t, clk, 1)
	third := waitAsync(ctx, b) // slot at 2s
	untilWaiting(t, clk, 2)

	// The second's timer fires late, at 1.5s: it sends then, and the
	// third's slot moves to 2.5s to keep the window.
	clk.Step(1500 * time.Millisecond)
	require.NoError(t, harness.Result(t, second))
	clk.Step(500 * time.Millisecond)
	untilWaiting(t, clk, 1)
	harness.Pending(t, third)
	clk.Step(500 * time.Millisecond)
	require.NoError(t, harness.Result(t, third))

	obs.mu.Lock()
	defer obs.mu.Unlock()
	assert.Equal(t, []limiter.WaitReason{limiter.WaitNone, limiter.WaitBudget, limiter.WaitBudget}, obs.reasons,
		"no server ever answered 429: no wait is a cooldown")
}
