package redisstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// ringScript adds ARGV[6..] to the ring of a window of limit ARGV[3] and
// returns the ring's sends, in order, then the limit-th latest of them
// and of the instants ARGV[4] (latest first, space-separated) with the
// ring's ARGV[5] latest left out (-1: none).
var ringScript = redis.NewScript(redisstore.HotScript(`
ringLoad()
local limit = tonumber(ARGV[3])
for i = 6, #ARGV do ringAdd(tonumber(ARGV[i]), limit) end
redis.call('HSET', M, ringFields())
local out = ringRead(0, ring.n)
local ws = {}
for x in string.gmatch(ARGV[4], '%d+') do ws[#ws + 1] = tonumber(x) end
out[#out + 1] = lthOf(ws, limit, tonumber(ARGV[5])) or -1
return out
`))

// runRing runs ringScript on budget key.
func runRing(t *testing.T, c *redis.Client, key string, limit int, ws []int64, skip int, add ...int64) (ring []int64, lth int64) {
	t.Helper()
	w := make([]string, len(ws))
	for i, x := range ws {
		w[i] = strconv.FormatInt(x, 10)
	}
	args := append(redisstore.HotArgs("p", time.Second, time.Minute), limit, strings.Join(w, " "), skip)
	for _, x := range add {
		args = append(args, x)
	}
	v, err := ringScript.Run(context.Background(), c, redisstore.RedisKeys(key), args...).Int64Slice()
	require.NoError(t, err)
	return v[:len(v)-1], v[len(v)-1]
}

// The ring keeps the latest limit sends, in order, whatever order they
// come in and however its buffer grows and wraps; and the limit-th latest
// of its sends and W's is the one a sorted merge gives.
func TestRingKeepsTheLatestSendsInOrder(t *testing.T) {
	c := redistest.Start(t).Client()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		key := "ring" + strconv.FormatUint(seed, 10)
		limit := 1 + rng.IntN(60)
		var all []int64
		now, err := c.Time(context.Background()).Result()
		require.NoError(t, err)
		at := now.UnixMicro() // sends within the timespan of a minute
		for range 5 + rng.IntN(200) {
			at += rng.Int64N(1000)
			x := at
			if rng.IntN(5) == 0 {
				x -= rng.Int64N(60_000) // recorded late, behind later sends
			}
			all = append(all, x)
			ws := make([]int64, rng.IntN(2*limit))
			for i := range ws {
				ws[i] = at + rng.Int64N(50_000) - 25_000
			}
			slices.SortFunc(ws, func(a, b int64) int { return int(b - a) })
			skip := rng.IntN(3)

			ring, lth := runRing(t, c, key, limit, ws, skip, x)

			sorted := slices.Sorted(slices.Values(all))
			want := sorted[max(len(sorted)-limit, 0):]
			require.Equal(t, want, ring, "seed %d: the latest %d sends, in order", seed, limit)
			merged := append(slices.Clone(ws), want[:max(len(want)-skip, 0)]...)
			slices.Sort(merged)
			wantLth := int64(-1)
			if len(merged) >= limit {
				wantLth = merged[len(merged)-limit]
			}
			require.Equal(t, wantLth, lth, "seed %d: the %d-th latest of %v and the ring but its %d latest", seed, limit, ws, skip)
		}
	}
}

// A window counts every send while its ring grows to the limit and then
// wraps, the oldest send giving way to the latest.
func TestRedisWindowCountsEverySendAsItsRingGrowsAndWraps(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 40, Timespan: 10 * time.Second}
	atOnce := func(n int) {
		t.Helper()
		for range n {
			res, err := s.Reserve(ctx, "k", p, store.Request{})
			require.NoError(t, err)
			require.True(t, res.OK && res.Wait == 0, "admitted at once: %+v", res)
		}
	}
	next := func() time.Duration {
		t.Helper()
		res, err := s.Reserve(ctx, "k", p, store.Request{})
		require.NoError(t, err)
		require.False(t, res.OK, "the window is full")
		return res.Wait
	}
	atOnce(20)
	redisstore.Advance(s, time.Second)
	atOnce(20)
	assert.InDelta(t, float64(9*time.Second), float64(next()), float64(redisTolerance), "until a timespan after the first 20, at 0s")

	redisstore.Advance(s, 9500*time.Millisecond) // 10.5s
	atOnce(20)
	assert.InDelta(t, float64(500*time.Millisecond), float64(next()), float64(redisTolerance), "until a timespan after the 20 at 1s")
	redisstore.Advance(s, time.Second) // 11.5s
	atOnce(20)
	assert.InDelta(t, float64(9*time.Second), float64(next()), float64(redisTolerance), "until a timespan after the 20 at 10.5s")

	size, err := client.StrLen(ctx, "{k}:v1:s").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 40*8, size, "8 bytes per send, the limit's worth")
}

// Sends a timespan past make room for new ones: a budget far from its
// limit keeps no more than its sends of the last timespan.
func TestRedisWindowRingReusesTheRoomOfSendsPastTheTimespan(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: time.Second}
	for range 5 {
		for range 16 {
			res, err := s.Reserve(ctx, "k", p, store.Request{})
			require.NoError(t, err)
			require.True(t, res.OK && res.Wait == 0, "admitted at once: %+v", res)
		}
		redisstore.Advance(s, 2*time.Second)
	}
	size, err := client.StrLen(ctx, "{k}:v1:s").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 16*8, size, "room for the 16 sends of one timespan")
}

// ringSends returns how many sends the ring of budget key holds, as the
// budget's state describes it.
func ringSends(t *testing.T, c *redis.Client, key string) int {
	t.Helper()
	v, err := c.HGet(context.Background(), "{"+key+"}:v1:m", "hot").Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	require.Len(t, v, 56, "hot field %q", v)
	return int(math.Float64frombits(binary.BigEndian.Uint64([]byte(v[8:16]))))
}

// Entries of the window's sorted set a timespan past count for nothing
// and go at the next decision that sees them.
func TestRedisWindowDropsEntriesATimespanPast(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 3, Timespan: time.Second}
	for range 3 {
		_, err := s.Reserve(ctx, "k", p, store.Request{})
		require.NoError(t, err)
	}
	res, err := s.Reserve(ctx, "k", p, anyWait)
	require.NoError(t, err)
	require.Positive(t, res.Wait)
	require.NoError(t, s.Release(ctx, "k", res.ID)) // a released slot at 1s, never claimed
	require.EqualValues(t, 1, windowEntries(t, client, "k"))

	redisstore.Advance(s, 2500*time.Millisecond)
	_, err = s.Reserve(ctx, "k", p, store.Request{})
	require.NoError(t, err)
	assert.Zero(t, windowEntries(t, client, "k"), "the released slot, a timespan past, is gone")
}

// windowEntries returns how many entries the sorted set of budget key
// holds, leaving out the placeholder at 0: its reservations, released
// slots and the sends kept there.
func windowEntries(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	n, err := c.ZCount(context.Background(), "{"+key+"}:v1:w", "(0", "+inf").Result()
	require.NoError(t, err)
	return n
}

// With far fewer entries than the limit, a decision reads no more than the
// oldest of them, and still drops those a timespan past.
func TestRedisWindowFarBelowItsLimitDropsEntriesATimespanPast(t *testing.T) {
	client, s := startStore(t, redisstore.Options{Presence: time.Hour})
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: time.Second}
	var ids []uint64
	for range 3 {
		r, err := s.Reserve(ctx, "k", p, deferredAtOnce) // kept in W until sent
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	require.NoError(t, s.Release(ctx, "k", ids[0]))
	require.Positive(t, windowEntries(t, client, "k"))

	redisstore.Advance(s, 2500*time.Millisecond)
	_, err := s.Reserve(ctx, "k", p, store.Request{})
	require.NoError(t, err)
	assert.Zero(t, windowEntries(t, client, "k"), "the entries a timespan past are gone")
}
