package redisstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// outageTimeout is the store timeout of the outage tests; a call may take
// it plus outageMargin at most.
const (
	outageTimeout = 200 * time.Millisecond
	outageMargin  = 300 * time.Millisecond
)

// events records a store's events.
type events struct {
	mu  sync.Mutex
	all []store.EventType
}

func (e *events) add(ev store.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev.Type)
}

func (e *events) count(t store.EventType) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, x := range e.all {
		if x == t {
			n++
		}
	}
	return n
}

func newURLStore(t *testing.T, srv *redistest.Server, policy store.FailurePolicy, ev *events) *redisstore.Store {
	t.Helper()
	opts := redisstore.Options{Timeout: outageTimeout, Failure: policy}
	if ev != nil {
		opts.OnEvent = ev.add
	}
	s, err := redisstore.NewFromURL(srv.URL(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// timedReserve reserves and asserts that the call did not hang.
func timedReserve(t *testing.T, s store.Store, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	t.Helper()
	start := time.Now()
	res, err := s.Reserve(context.Background(), key, p, r)
	assert.Less(t, time.Since(start), outageTimeout+outageMargin, "a call never hangs on a dead store")
	return res, err
}

var (
	outagePolicy = store.Policy{Strategy: store.StrategyWindow, Limit: 10, Timespan: time.Minute}
	anyWait      = store.Request{MaxWait: store.NoMaxWait}
)

func TestRedisOutageLocalSharesTheLimitThenRecovers(t *testing.T) {
	srv := redistest.Start(t)
	var ev events
	a := newURLStore(t, srv, store.FailureLocal, &ev)
	b := newURLStore(t, srv, store.FailureLocal, nil)
	for _, s := range []*redisstore.Store{a, b} {
		res, err := s.Reserve(context.Background(), "k", outagePolicy, anyWait)
		require.NoError(t, err)
		require.Zero(t, res.Wait)
	}
	// a counts the processes sharing the budget at its next upkeep.
	require.NoError(t, redisstore.UpkeepNow(a))

	srv.Kill()
	for i := range 4 {
		res, err := timedReserve(t, a, "k", outagePolicy, anyWait)
		require.NoError(t, err)
		assert.Zero(t, res.Wait, "request %d fits this process's share, 10 / 2 processes, less the one it sent through Redis", i)
	}
	res, err := timedReserve(t, a, "k", outagePolicy, store.Request{MaxWait: 0})
	require.NoError(t, err)
	assert.False(t, res.OK, "the fifth request in the outage exceeds the share")
	assert.True(t, a.Down())
	assert.Equal(t, 1, ev.count(store.EventDown), "the outage starts once")
	assert.Equal(t, 5, ev.count(store.EventFallback))

	srv.Restart()
	require.Eventually(t, func() bool { return !a.Down() }, 5*time.Second, 10*time.Millisecond, "the store is probed about once a second")
	assert.Equal(t, 1, ev.count(store.EventUp))
	res, err = a.Reserve(context.Background(), "k", outagePolicy, anyWait)
	require.NoError(t, err)
	assert.Zero(t, res.Wait, "the shared budget is used again (the restarted Redis lost it, and learned the 5 this process sent)")
	assert.Equal(t, 5, ev.count(store.EventFallback), "no request falls back once Redis answers")
}

func TestRedisOutageOpenAdmits(t *testing.T) {
	srv := redistest.Start(t)
	s := newURLStore(t, srv, store.FailureOpen, nil)
	srv.Kill()
	for i := range 20 {
		res, err := timedReserve(t, s, "k", outagePolicy, store.Request{MaxWait: 0})
		require.NoError(t, err)
		assert.True(t, res.OK, "request %d", i)
	}
}

func TestRedisOutageClosedFails(t *testing.T) {
	srv := redistest.Start(t)
	s := newURLStore(t, srv, store.FailureClosed, nil)
	srv.Kill()
	for range 3 {
		_, err := timedReserve(t, s, "k", outagePolicy, anyWait)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "redis unavailable")
		assert.Contains(t, err.Error(), `"closed"`)
	}
}

// A refusal of the closed policy says when to try again: at the store's
// next probe of Redis, so that a caller honouring it does not spin. It
// still wraps the Redis error.
func TestRedisOutageClosedSaysWhenToRetry(t *testing.T) {
	srv := redistest.Start(t)
	s := newURLStore(t, srv, store.FailureClosed, nil)
	srv.Kill()
	for range 3 {
		_, err := timedReserve(t, s, "k", outagePolicy, anyWait)
		require.Error(t, err)
		var hasRetryAfter rlerrors.HasRetryAfter
		require.ErrorAs(t, err, &hasRetryAfter)
		assert.GreaterOrEqual(t, hasRetryAfter.RetryAfter(), 100*time.Millisecond, "never a spin")
		assert.LessOrEqual(t, hasRetryAfter.RetryAfter(), time.Second, "no later than the next probe")
		var opErr *net.OpError
		assert.True(t, errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded),
			"the Redis error is wrapped (a dial error, EOF on a pooled connection, or the call's timeout while the client redials): %v", err)
		assert.Contains(t, err.Error(), "retry after")
	}
}

func TestRedisSlowServerTimesOut(t *testing.T) {
	srv := redistest.Start(t)
	s := newURLStore(t, srv, store.FailureLocal, nil)
	_, err := s.Reserve(context.Background(), "k", outagePolicy, anyWait)
	require.NoError(t, err)

	srv.Pause()
	t.Cleanup(srv.Resume)
	for range 3 {
		res, err := timedReserve(t, s, "k", outagePolicy, anyWait)
		require.NoError(t, err)
		assert.True(t, res.OK, "the local fallback decides")
	}
	srv.Resume()
	require.Eventually(t, func() bool { return !s.Down() }, 5*time.Second, 10*time.Millisecond)
}

func TestRedisWaiterSurvivesOutage(t *testing.T) {
	srv := redistest.Start(t)
	s := newURLStore(t, srv, store.FailureLocal, nil)
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: 10 * time.Second}
	_, err := s.Reserve(context.Background(), "k", p, anyWait)
	require.NoError(t, err)
	res, err := s.Reserve(context.Background(), "k", p, anyWait)
	require.NoError(t, err)
	require.NotZero(t, res.ID)

	srv.Kill()
	redisstore.Advance(s, 10*time.Second)
	left, err := s.Confirm(context.Background(), "k", res.ID)
	require.NoError(t, err, "a waiter whose slot has come is sent although Redis is down")
	assert.Zero(t, left)
}

func TestRedisPresenceExpiryFreesADeadProcessesSlots(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyLinear, Limit: 10, Timespan: 10 * time.Second} // one per second
	// This process's presence lasts 150ms after its last refresh.
	dead := redisstore.New(srv.Client(), redisstore.Options{Presence: 100 * time.Millisecond})
	for i := range 5 {
		res, err := dead.Reserve(ctx, "k", p, anyWait)
		require.NoError(t, err)
		assert.InDelta(t, float64(time.Duration(i)*time.Second), float64(res.Wait), float64(redisTolerance), "request %d", i)
	}

	alive := redisstore.New(srv.Client(), redisstore.Options{})
	t.Cleanup(func() { _ = alive.Close() })
	moved := make(chan struct{}, 1)
	alive.Notify("k", func() {
		select {
		case moved <- struct{}{}:
		default:
		}
	})
	waiter, err := alive.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.InDelta(t, float64(5*time.Second), float64(waiter.Wait), float64(redisTolerance),
		"the other process's reservations count while it is present")

	// The other process stops refreshing its presence (here: this one's
	// view of the time moves past its expiry, to 1.5s); this one's next
	// upkeep finds it gone.
	redisstore.Advance(alive, 1500*time.Millisecond)
	require.NoError(t, redisstore.UpkeepNow(alive))
	res, err := alive.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.InDelta(t, float64(1500*time.Millisecond), float64(res.Wait), float64(redisTolerance),
		"a newcomer takes a freed slot (at 3s)")
	left, err := alive.Confirm(ctx, "k", waiter.ID)
	require.NoError(t, err)
	assert.InDelta(t, float64(500*time.Millisecond), float64(left), float64(redisTolerance),
		"the waiter moved into the earliest freed slot, at 2s")
	select {
	case <-moved:
	case <-time.After(5 * time.Second):
		t.Error("the waiters were not told that their slots moved")
	}
}

func TestRedisHoldsFarReservationsInProcess(t *testing.T) {
	client, s := startStore(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 2, Timespan: 10 * time.Second}
	var ids []uint64
	for range 6 {
		res, err := s.Reserve(ctx, "k", p, anyWait)
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	assert.Equal(t, 2, ringSends(t, client, "k"), "the two sent at once are recorded")
	assert.EqualValues(t, 2, windowEntries(t, client, "k"), "of the four waiting, those more than one timespan ahead wait in-process, not in Redis")

	// A little past one timespan, ids[2] is sent: late, so that, as in
	// the memory store, ids[3] moves to its instant and the held ids[4]
	// to one timespan after it.
	const margin = 500 * time.Millisecond
	redisstore.Advance(s, 10*time.Second+margin)
	left, err := s.Confirm(ctx, "k", ids[2])
	require.NoError(t, err)
	assert.Zero(t, left)
	// A little later, the held request's slot is within one timespan,
	// however the store's estimate of the server's clock is off.
	redisstore.Advance(s, margin)
	left, err = s.Confirm(ctx, "k", ids[4])
	require.NoError(t, err)
	assert.InDelta(t, float64(10*time.Second-margin), float64(left), float64(redisTolerance), "the held request's slot is one timespan after the late send")
	member := redisstore.Member(s, "k", ids[4])
	require.NotEmpty(t, member)
	_, err = client.ZScore(ctx, "{k}:v1:w", member).Result()
	assert.NoError(t, err, "once within a timespan, a held request is recorded in Redis")
}

func TestRedisCloseReleasesThisProcessesSlots(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: 10 * time.Second}
	a := redisstore.New(srv.Client(), redisstore.Options{})
	for range 2 {
		_, err := a.Reserve(ctx, "k", p, anyWait)
		require.NoError(t, err)
	}
	b := redisstore.New(srv.Client(), redisstore.Options{})
	t.Cleanup(func() { _ = b.Close() })
	res, err := b.Reserve(ctx, "k", p, store.Request{MaxWait: 15 * time.Second})
	require.NoError(t, err)
	assert.False(t, res.OK, "the slot at 10s belongs to the other process")

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	res, err = b.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	assert.InDelta(t, float64(10*time.Second), float64(res.Wait), float64(redisTolerance), "the closed process's slot is free")
}

func TestRedisWarnsWhenBudgetsCanBeEvicted(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory-policy", "allkeys-lru")
	var mu sync.Mutex
	var logs []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, args)
	}, funcr.Options{})
	s := redisstore.New(srv.Client(), redisstore.Options{Logger: logger})
	t.Cleanup(func() { _ = s.Close() })
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		mu.Lock()
		defer mu.Unlock()
		assert.Len(c, logs, 1)
		if len(logs) == 1 {
			assert.Contains(c, logs[0], "noeviction")
			assert.Contains(c, logs[0], "allkeys-lru")
		}
	}, 5*time.Second, 10*time.Millisecond, "one warning at start")
}

func TestRedisForgetsBudgetsNoLongerUsed(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s := redisstore.New(srv.Client(), redisstore.Options{})
	t.Cleanup(func() { _ = s.Close() })
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: time.Second}
	_, err := s.Reserve(ctx, "idle", p, anyWait)
	require.NoError(t, err)
	for range 2 { // the second waits: it is outstanding
		_, err = s.Reserve(ctx, "busy", p, anyWait)
		require.NoError(t, err)
	}
	require.Equal(t, 2, redisstore.BudgetsKept(s))

	redisstore.Advance(s, 2*time.Minute)
	redisstore.ForgetIdle(s)
	assert.Equal(t, 1, redisstore.BudgetsKept(s), "the budget with nothing outstanding is forgotten; the one with a waiter is kept")
}

// TestRedisOutageKeepsOneProcessExact: a process's own sends carry over
// into the local budget that takes over in an outage, and back into the
// shared budget when Redis answers again, so that no window of one
// timespan sees more than the limit leave, across both changeovers.
func TestRedisOutageKeepsOneProcessExact(t *testing.T) {
	srv := redistest.Start(t)
	var ev events
	s := newURLStore(t, srv, store.FailureLocal, &ev)
	const key = "k8s:exact:api.example.com"
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 50, Timespan: time.Second}
	now := store.Request{MaxWait: 0}

	sendAll := func(what string) {
		t.Helper()
		for i := range p.Limit {
			res, err := timedReserve(t, s, key, p, now)
			require.NoError(t, err)
			require.True(t, res.OK, "%s: request %d of %d admitted at once", what, i+1, p.Limit)
		}
		res, err := timedReserve(t, s, key, p, now)
		require.NoError(t, err)
		require.False(t, res.OK, "%s: the %d-th within the timespan is refused", what, p.Limit+1)
	}

	sendAll("through Redis")
	srv.Kill()
	res, err := timedReserve(t, s, key, p, now)
	require.NoError(t, err)
	assert.False(t, res.OK, "in the outage, the local budget counts the 50 sent through Redis just before")
	requireOutage(t, &ev)

	time.Sleep(p.Timespan) // the 50 leave the window (an integration test on a real clock)
	sendAll("in the outage")

	srv.Restart()
	require.Eventually(t, func() bool { return ev.count(store.EventUp) == 1 }, 10*time.Second, 10*time.Millisecond)
	res, err = timedReserve(t, s, key, p, now)
	require.NoError(t, err)
	assert.False(t, res.OK, "back on Redis, the shared budget counts the 50 sent in the outage")
	assert.Positive(t, res.Wait)
}

// slowReplies is a go-redis hook that, while on, holds every reply for
// delay before the caller sees it.
type slowReplies struct {
	on    atomic.Bool
	delay time.Duration
}

func (h *slowReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.on.Load() {
			time.Sleep(h.delay) // a slow network on the way back
		}
		return err
	}
}

func (h *slowReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedisOutageLearnsSendsNoEarlierThanTheyWere: the sends of an outage
// are told to Redis on the server's clock, moved from the local one. The
// difference a reply that came back slowly measures (here 250ms after the
// server read its time) is too small: it would place them earlier than
// they were, they would leave the window that much too soon, and the
// window admit a send more in the timespan they end.
func TestRedisOutageLearnsSendsNoEarlierThanTheyWere(t *testing.T) {
	srv := redistest.Start(t)
	slow := &slowReplies{delay: 250 * time.Millisecond}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: outageTimeout, ReadTimeout: outageTimeout,
		WriteTimeout: outageTimeout, PoolTimeout: outageTimeout, MaxRetries: -1})
	client.AddHook(slow)
	t.Cleanup(func() { _ = client.Close() })
	var ev events
	s := redisstore.New(client, redisstore.Options{Timeout: outageTimeout, Failure: store.FailureLocal, OnEvent: ev.add})
	t.Cleanup(func() { _ = s.Close() })
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: 5 * time.Second}
	ctx := context.Background()
	now := store.Request{MaxWait: 0}

	_, err := s.Reserve(ctx, "k8s:warm:api.example.com", p, now)
	require.NoError(t, err, "the library loaded, at full speed")
	slow.on.Store(true)
	_, err = s.Reserve(ctx, "k8s:slow:api.example.com", p, now)
	slow.on.Store(false)
	require.NoError(t, err)
	require.Zero(t, ev.count(store.EventDown), "the reply was slow, not lost")

	srv.Kill()
	const key = "k8s:learn:api.example.com"
	sent := time.Now() // no later than the send, on the server's clock too
	res, err := timedReserve(t, s, key, p, now)
	require.NoError(t, err)
	require.True(t, res.OK, "sent in the outage, decided locally")
	requireOutage(t, &ev)
	srv.Restart() // empty: the process tells Redis of the send
	require.Eventually(t, func() bool { return ev.count(store.EventUp) == 1 }, 10*time.Second, 10*time.Millisecond)

	res, err = s.Reserve(ctx, key, p, anyWait)
	asked := time.Now()
	require.NoError(t, err)
	require.True(t, res.OK)
	assert.GreaterOrEqual(t, res.Wait, sent.Add(p.Timespan).Sub(asked),
		"back on Redis, the next waits until a timespan after the send of the outage at the earliest")
}

// TestRedisOutageCountsARequestKeptToBeConfirmed: a request admitted at
// once and kept to be confirmed (it waits for a seat before it leaves)
// counts in the local budget of an outage that starts before it leaves,
// from its slot, as it counts in Redis.
func TestRedisOutageCountsARequestKeptToBeConfirmed(t *testing.T) {
	srv := redistest.Start(t)
	var ev events
	s := newURLStore(t, srv, store.FailureLocal, &ev)
	const key = "k8s:kept:api.example.com"
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 2, Timespan: time.Minute}
	kept, err := s.Reserve(context.Background(), key, p, deferredAtOnce)
	require.NoError(t, err)
	require.True(t, kept.OK)
	require.NotZero(t, kept.ID)
	sent, err := s.Reserve(context.Background(), key, p, store.Request{MaxWait: 0})
	require.NoError(t, err)
	require.True(t, sent.OK)

	srv.Kill()
	res, err := timedReserve(t, s, key, p, store.Request{MaxWait: 0})
	require.NoError(t, err)
	assert.False(t, res.OK, "the local budget counts both: the one kept to be confirmed too")
	requireOutage(t, &ev)
	s.Sent(key, kept.ID) // it leaves in the outage, counted locally
}

// A cooldown another process sets wakes this one's waiters even when no
// reservation is ahead to move: requests admitted already and waiting for
// a seat are held back by it too.
func TestRedisCooldownElsewhereWakesWaitersWithNothingAhead(t *testing.T) {
	srv := redistest.Start(t)
	const key = "k8s:cooldown:api.example.com"
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 100, Timespan: time.Second}
	a := newURLStore(t, srv, store.FailureLocal, nil)
	b := newURLStore(t, srv, store.FailureLocal, nil)
	moved := make(chan struct{}, 1)
	a.Notify(key, func() {
		select {
		case moved <- struct{}{}:
		default:
		}
	})
	res, err := a.Reserve(context.Background(), key, p, deferredAtOnce)
	require.NoError(t, err)
	require.Zero(t, res.Wait, "admitted at once: nothing ahead")

	require.Eventually(t, func() bool {
		// Until a's subscription is in place; the cooldown only ever
		// extends, and each call extends it.
		_, err := b.SetCooldown(context.Background(), key, p, time.Minute+time.Duration(time.Now().UnixNano()%int64(time.Second)))
		require.NoError(t, err)
		select {
		case <-moved:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, 5*time.Second, time.Millisecond, "a's waiters are woken by b's cooldown")
}

// requireOutage requires the outage to start, once: at once when Redis
// refuses, or when the background check finds it silent past the store's
// timeout after a call cut short by a request's max wait.
func requireOutage(t *testing.T, ev *events) {
	t.Helper()
	require.Eventually(t, func() bool { return ev.count(store.EventDown) > 0 }, outageTimeout+outageMargin, 5*time.Millisecond)
	require.Equal(t, 1, ev.count(store.EventDown))
}
