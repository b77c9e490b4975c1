package limiter_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// senderStore is the memory store posing as one whose decisions cost a
// round trip (a store.Sender): it records what it is asked, and records a
// send where its request said it left.
type senderStore struct {
	*memorystore.Store
	mu       sync.Mutex
	deferred int      // reservations asked to be confirmed
	sent     []uint64 // the reservations Sent was told of
}

func (s *senderStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	s.mu.Lock()
	if r.Deferred {
		s.deferred++
	}
	s.mu.Unlock()
	return s.Store.Reserve(ctx, key, p, r)
}

func (s *senderStore) Sent(key string, id uint64) {
	s.mu.Lock()
	s.sent = append(s.sent, id)
	s.mu.Unlock()
	_, _ = s.Store.Confirm(context.Background(), key, id)
}

func (s *senderStore) counts() (deferred, sent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deferred, len(s.sent)
}

// slotFirst returns a transport of a budget of one seat and 2 requests per
// 10s on a senderStore, on a fake clock, in front of a new server, with
// one request holding the seat.
func slotFirst(t *testing.T, opts limiter.Options) (rt http.RoundTripper, srv *server, b *limiter.Budget, st *senderStore, clk *clocktesting.FakeClock, holder *pending, hold <-chan error) {
	t.Helper()
	clk = clocktesting.NewFakeClock(time.Now())
	st = &senderStore{Store: memorystore.New(clk)}
	opts.Policy, opts.Clock, opts.Concurrency = window(2, 10*time.Second), clk, limiter.Concurrency{Fixed: 1}
	l := limiter.New(st, opts)
	t.Cleanup(func() { l.Close() })
	b = l.Budget(key, "test")
	srv = newServer()
	rt = b.Wrap(srv)
	hold = send(context.Background(), rt, "/first")
	holder = srv.next(t)
	return rt, srv, b, st, clk, holder, hold
}

func TestSeatWaiterReservesItsSlotFirstAndIsCountedWhereItLeaves(t *testing.T) {
	rt, srv, b, st, clk, holder, hold := slotFirst(t, limiter.Options{})
	deferred, _ := st.counts()
	require.Zero(t, deferred, "a request that finds a seat free takes it, then its slot")

	second := send(context.Background(), rt, "/second")
	harness.Settle(t, func() bool { return b.Seats().Waiting == 1 }, "the second request waits for the seat")
	deferred, sent := st.counts()
	assert.Equal(t, 1, deferred, "its slot is reserved before its seat, holding no seat across the store's round trip")
	assert.Zero(t, sent)

	clk.Step(2 * time.Second) // the seat comes 2s later
	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
	srv.respond(srv.next(t), http.StatusOK, nil)
	require.NoError(t, harness.Result(t, second))
	_, sent = st.counts()
	require.Equal(t, 1, sent, "the store is told when it left")

	// The window's sends are at 0s and 2s, where they left: at 10.5s one
	// more fits, and the next waits for the one at 2s to leave the window.
	clk.Step(8500 * time.Millisecond)
	now := k8sratelimit.WithMaxWait(context.Background(), 0)
	require.NoError(t, b.Wait(now))
	rle := harness.RateLimitExceeded(t, b.Wait(now))
	assert.Equal(t, 1500*time.Millisecond, rle.RetryAfter(), "the second send counts from 2s, when it left, not from 0s, when its slot was reserved")
}

func TestSeatWaiterGivingUpSendsNothingAndLeavesTheLine(t *testing.T) {
	rt, srv, b, st, clk, holder, hold := slotFirst(t, limiter.Options{MaxWait: new(time.Second)})
	second := send(context.Background(), rt, "/second")
	harness.Settle(t, func() bool { return b.Seats().Waiting == 1 && clk.HasWaiters() }, "the second request waits for the seat")
	clk.Step(time.Second)
	rle := harness.RateLimitExceeded(t, harness.Result(t, second))
	assert.Equal(t, time.Second, rle.MaxWait)
	assert.Equal(t, limiter.SeatStatus{Limit: 1, Share: 1, InUse: 1,
		ByClass: [limiter.NumClasses]limiter.ClassSeats{limiter.ClassRead: {InFlight: 1}}}, b.Seats(), "its place in line is gone")
	_, sent := st.counts()
	assert.Zero(t, sent, "nothing was sent")

	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
	srv.none(t)
}

func TestSeatWaiterWhoseSlotACooldownMovedWaitsForIt(t *testing.T) {
	rt, srv, b, st, clk, holder, hold := slotFirst(t, limiter.Options{})
	second := send(context.Background(), rt, "/second")
	harness.Settle(t, func() bool { return b.Seats().Waiting == 1 }, "the second request waits for the seat")
	_, err := b.SetCooldown(context.Background(), 5*time.Second)
	require.NoError(t, err)

	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
	harness.Settle(t, clk.HasWaiters, "the second request sleeps until its moved slot")
	srv.none(t)
	clk.Step(5 * time.Second)
	srv.respond(srv.next(t), http.StatusOK, nil)
	require.NoError(t, harness.Result(t, second))
	_, sent := st.counts()
	assert.Zero(t, sent, "its slot was confirmed with the store before it left, as a waiter's is")
}

func TestSeatWaiterWhoseSlotIsAheadWaitsForItHoldingNoSeatNorPlaceInLine(t *testing.T) {
	rt, srv, b, _, clk, holder, hold := slotFirst(t, limiter.Options{})
	second := send(context.Background(), rt, "/second")
	harness.Settle(t, func() bool { return b.Seats().Waiting == 1 }, "the second request, its slot now, waits for the seat")
	third := send(context.Background(), rt, "/third")
	harness.Settle(t, clk.HasWaiters, "the third request sleeps until its slot, 10s ahead")
	assert.Equal(t, 1, b.Seats().Waiting, "not in line for a seat before its slot has come")

	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
	srv.respond(srv.next(t), http.StatusOK, nil)
	require.NoError(t, harness.Result(t, second))
	srv.none(t)

	clk.Step(10 * time.Second)
	p := srv.next(t)
	assert.Equal(t, "/third", p.req.URL.Path)
	srv.respond(p, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, third))
}

func TestSeatTakenFreeIsGivenBackWhileItsSlotIsAhead(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	l := limiter.New(&senderStore{Store: memorystore.New(clk)}, limiter.Options{Policy: window(1, 10*time.Second), Clock: clk, Concurrency: limiter.Concurrency{Fixed: 1}})
	t.Cleanup(func() { l.Close() })
	b := l.Budget(key, "test")
	srv := newServer()
	rt := b.Wrap(srv)
	first := send(context.Background(), rt, "/first")
	srv.respond(srv.next(t), http.StatusOK, nil)
	require.NoError(t, harness.Result(t, first))

	second := send(context.Background(), rt, "/second")
	harness.Settle(t, clk.HasWaiters, "the second request sleeps until its slot, 10s ahead")
	assert.Equal(t, limiter.SeatStatus{Limit: 1, Share: 1}, b.Seats(), "holding no seat meanwhile")

	clk.Step(10 * time.Second)
	srv.respond(srv.next(t), http.StatusOK, nil)
	require.NoError(t, harness.Result(t, second))
}
