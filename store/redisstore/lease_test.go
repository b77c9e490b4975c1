package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// startLeasing returns a store on a Redis server of its own, whose leases
// may be used for d.
func startLeasing(t *testing.T, srv *redistest.Server, d time.Duration) *redisstore.Store {
	t.Helper()
	s := redisstore.New(srv.Client(), redisstore.Options{Presence: time.Hour})
	t.Cleanup(func() { _ = s.Close() })
	redisstore.LeaseFor(s, d)
	return s
}

// roomLeft returns how many more requests the budget key under p admits
// at once, taking them.
func roomLeft(t *testing.T, s *redisstore.Store, key string, p store.Policy) int {
	t.Helper()
	room := 0
	for ; room < p.Limit; room++ {
		r, err := s.Reserve(context.Background(), key, p, store.Request{})
		require.NoError(t, err)
		if !r.OK {
			break
		}
	}
	return room
}

// Requests that wait for seats on a budget far from its limit take their
// slots from leases: a fraction of the round trips, and the budget counts
// exactly the requests that left, the leased slots none used dropped.
func TestRedisALeaseSavesTheRoundTripsOfRequestsThatWaitForSeats(t *testing.T) {
	srv := redistest.Start(t)
	s := startLeasing(t, srv, time.Second)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: time.Minute}
	_, err := s.Reserve(ctx, "other", p, anyWait) // the library is loaded
	require.NoError(t, err)
	require.NoError(t, srv.ResetStats(ctx))

	const requests = 200
	seen := map[uint64]bool{}
	for i := range requests {
		r, err := s.Reserve(ctx, "k", p, deferredAtOnce)
		require.NoError(t, err)
		require.True(t, r.OK)
		require.Zero(t, r.Wait, "request %d", i)
		require.NotZero(t, r.ID)
		require.False(t, seen[r.ID], "request %d has a reservation of its own", i)
		seen[r.ID] = true
		s.Sent("k", r.ID)
	}
	calls, _, err := srv.FunctionCalls(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, calls, int64(requests/8), "the reservations made in Redis, the rest leased")
	t.Logf("%d requests, %d reservations made in Redis", requests, calls)

	redisstore.Advance(s, time.Second) // what is left of the lease is past its time
	r, err := s.Reserve(ctx, "k", p, store.Request{})
	require.NoError(t, err)
	require.Zero(t, r.Wait)
	redisstore.FlushSent(s)

	room := roomLeft(t, s, "k", p)
	assert.Equal(t, p.Limit-requests-1, room, "the budget counts the requests that left, and no leased slot none used")
}

// A lease is not used across a cooldown, whichever process set it.
func TestRedisALeaseIsNotUsedAcrossACooldown(t *testing.T) {
	srv := redistest.Start(t)
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: time.Minute}
	ctx := context.Background()
	for _, by := range []string{"this process", "another process"} {
		t.Run(by, func(t *testing.T) {
			key := "k-" + by
			s := startLeasing(t, srv, time.Hour)
			setter := s
			if by == "another process" {
				setter = startLeasing(t, srv, time.Hour)
			}
			// This process drops its lease when it sets the cooldown, before
			// it hears of it: it listens only for the other's.
			heard := make(chan struct{}, 1)
			if setter != s {
				s.Notify(key, func() {
					select {
					case heard <- struct{}{}:
					default:
					}
				})
			} else {
				heard <- struct{}{}
			}
			for range 2 { // the second, following the first, leases
				r, err := s.Reserve(ctx, key, p, deferredAtOnce)
				require.NoError(t, err)
				require.Zero(t, r.Wait)
				s.Sent(key, r.ID)
			}

			_, err := setter.SetCooldown(ctx, key, p, 5*time.Second)
			require.NoError(t, err)
			select {
			case <-heard:
			case <-time.After(5 * time.Second):
				require.Fail(t, "the cooldown is never heard of")
			}
			r, err := s.Reserve(ctx, key, p, deferredAtOnce)
			require.NoError(t, err)
			assert.True(t, r.Cooldown, "decided in Redis, during the cooldown")
			assert.InDelta(t, float64(5*time.Second), float64(r.Wait), float64(redisTolerance), "the slot comes when the cooldown ends")
		})
	}
}

// Requests that come further apart than a lease lasts lease nothing: the
// budget counts exactly the requests that left, with nothing to drop.
func TestRedisRequestsFarApartLeaseNothing(t *testing.T) {
	srv := redistest.Start(t)
	s := startLeasing(t, srv, time.Second)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 100, Timespan: time.Minute}
	const requests = 10
	for range requests {
		r, err := s.Reserve(ctx, "k", p, deferredAtOnce)
		require.NoError(t, err)
		require.Zero(t, r.Wait)
		s.Sent("k", r.ID)
		redisstore.Advance(s, time.Second)
	}
	redisstore.FlushSent(s)
	entries, err := srv.Client().ZRange(ctx, redisstore.RedisKeys("k")[0], 0, -1).Result()
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the sends are in the ring, and nothing leased waits in W beside the placeholder: %v", entries)
	room := roomLeft(t, s, "k", p)
	assert.Equal(t, p.Limit-requests, room, "the budget counts the requests that left")
}

// A lease that no request uses is dropped when its time is up, with no
// request to drop it: the budget counts only the requests that left.
func TestRedisALeaseNoRequestUsesIsDroppedWhenItsTimeIsUp(t *testing.T) {
	srv := redistest.Start(t)
	s := startLeasing(t, srv, 20*time.Millisecond)
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 100, Timespan: time.Minute}
	for range 2 { // the second, following the first, leases
		r, err := s.Reserve(ctx, "k", p, deferredAtOnce)
		require.NoError(t, err)
		require.Zero(t, r.Wait)
		s.Sent("k", r.ID)
	}
	require.Eventually(t, func() bool {
		redisstore.FlushSent(s)
		n, err := srv.Client().ZCard(ctx, redisstore.RedisKeys("k")[0]).Result()
		require.NoError(t, err)
		return n == 1
	}, 5*time.Second, 10*time.Millisecond, "W keeps only its placeholder: the sends went to the ring, the lease was dropped")
	assert.Equal(t, p.Limit-2, roomLeft(t, s, "k", p), "the budget counts the requests that left")
}
