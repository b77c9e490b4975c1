package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/k8sratelimit/k8sratelimit/internal/benchref"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// The Redis benchmarks run the store beside two references on one
// redis-server, through one client, in one run:
//
//   - evalsha: EVALSHA of a script that only returns 1, the round-trip
//     floor of any decision made by a script;
//   - redis_rate: github.com/go-redis/redis_rate/v10's Limiter.Allow (GCRA,
//     one GET and one SET), at the limit of redisBenchLinear.
//
// Every request must be admitted at once: a benchmark fails on any other
// answer. The store runs with FailureClosed, so that a Redis error fails the
// benchmark instead of being decided, unnoticed, by the in-process
// fallback. BenchmarkRedisAdmission reports, beside the round trip, the
// server's time in scripts per decision (server-µs/op).
//
// redisBenchWindow admits a million requests per 10ms, which no benchmark
// can exhaust (a decision takes tens of µs). A window keeps each send for
// a timespan, in its ring: at benchmark speed a budget holds a few hundred
// live sends, the same order as the default of 400 per minute in full use;
// a longer timespan would grow the ring towards the limit over the run.
// redisBenchLinear spaces requests 1µs apart (the store's resolution) with
// a burst of a million: each decision moves the budget's theoretical
// arrival time 1µs on, far less than the time it takes, so it never falls
// behind.
var (
	redisBenchWindow = store.Policy{Strategy: store.StrategyWindow, Limit: 1_000_000, Timespan: 10 * time.Millisecond}
	redisBenchSeats  = store.Policy{Strategy: store.StrategyWindow, Limit: 1_000_000, Timespan: time.Second}
	redisBenchLinear = store.Policy{Strategy: store.StrategyLinear, Limit: 1_000_000, Timespan: time.Second, Burst: 1_000_000}
	redisBenchRate   = redis_rate.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}
)

// redisAdmit makes one admission decision on key and reports whether it
// was admitted at once.
type redisAdmit func(ctx context.Context, key string) (bool, error)

// redisKind is one contender: newAdmit makes its admission function on a
// client, with whatever state it keeps, released by the test's cleanup.
type redisKind struct {
	name     string
	newAdmit func(tb testing.TB, c *redis.Client) redisAdmit
}

// redisFloor is the bare round trip: EVALSHA of a script that returns 1.
var redisFloor = redis.NewScript("return 1")

var redisKinds = []redisKind{
	{"window", redisStoreAdmit(redisBenchWindow)},
	{"linear", redisStoreAdmit(redisBenchLinear)},
	// A request that waited for a seat: its slot reserved first, its send
	// recorded where it left afterwards (lua/sent.lua), both counted here
	// though the second runs off the request's path.
	{"window-seat-waiter", func(tb testing.TB, c *redis.Client) redisAdmit {
		s := benchStore(tb, c)
		return func(ctx context.Context, key string) (bool, error) {
			res, err := s.Reserve(ctx, key, redisBenchWindow, deferredAtOnce)
			if err != nil || !res.OK || res.Wait != 0 {
				return false, err
			}
			s.Sent(key, res.ID)
			redisstore.FlushSent(s)
			return true, nil
		}
	}},
	// Forty requests waiting for seats, as forty workers over a level of
	// three seats keep: each decision reserves a slot while the forty
	// reserved before it still wait in W to be confirmed, and the earliest
	// of them is then sent. The timespan is a second, so that the earliest
	// is sent well within it even under valgrind.
	{"window-40-seat-waiters", func(tb testing.TB, c *redis.Client) redisAdmit {
		s := benchStore(tb, c)
		var mu sync.Mutex
		waiting := map[string][]uint64{}
		return func(ctx context.Context, key string) (bool, error) {
			res, err := s.Reserve(ctx, key, redisBenchSeats, deferredAtOnce)
			if err != nil || !res.OK || res.Wait != 0 {
				return false, err
			}
			mu.Lock()
			q, sent := append(waiting[key], res.ID), uint64(0)
			if len(q) > 40 {
				sent, q = q[0], q[1:]
			}
			waiting[key] = q
			mu.Unlock()
			if sent != 0 {
				s.Sent(key, sent)
				redisstore.FlushSent(s)
			}
			return true, nil
		}
	}},
	{"evalsha", func(_ testing.TB, c *redis.Client) redisAdmit {
		return func(ctx context.Context, key string) (bool, error) {
			n, err := redisFloor.Run(ctx, c, []string{key}).Int64()
			return n == 1, err
		}
	}},
	{"redis_rate", func(_ testing.TB, c *redis.Client) redisAdmit {
		l := redis_rate.NewLimiter(c)
		return func(ctx context.Context, key string) (bool, error) {
			res, err := l.Allow(ctx, key, redisBenchRate)
			return err == nil && res.Allowed == 1, err
		}
	}},
}

// redisStoreAdmit returns the store's Reserve under policy p as a
// contender.
func redisStoreAdmit(p store.Policy) func(testing.TB, *redis.Client) redisAdmit {
	return func(tb testing.TB, c *redis.Client) redisAdmit {
		s := benchStore(tb, c)
		return func(ctx context.Context, key string) (bool, error) {
			res, err := s.Reserve(ctx, key, p, store.Request{MaxWait: store.NoMaxWait})
			return err == nil && res.OK && res.Wait == 0, err
		}
	}
}

// benchStores are the stores the contenders made, for pastFirstUse.
var benchStores []*redisstore.Store

// benchStore returns a store on c, closed when tb ends.
func benchStore(tb testing.TB, c *redis.Client) *redisstore.Store {
	s := redisstore.New(c, redisstore.Options{Failure: store.FailureClosed})
	tb.Cleanup(func() { _ = s.Close() })
	benchStores = append(benchStores, s)
	return s
}

// pastFirstUse brings every budget of the contenders' stores, all used
// once, to its steady state: a store counts the processes sharing a
// budget on every request in its first seconds on it, and then every
// presence interval.
func pastFirstUse() {
	for _, s := range benchStores {
		redisstore.PastFirstUse(s)
	}
	benchStores = nil
}

// redisBudgetCounts are the numbers of budgets the admission benchmarks
// cycle over: one, and 10,000 distinct keys taken in turn.
var redisBudgetCounts = []struct {
	name string
	keys []string
}{
	{"1-budget", []string{benchref.Key}},
	{"10k-budgets", benchref.BudgetKeys(benchref.ManyBudgets)},
}

// BenchmarkRedisAdmission is one admission decision of each kind, serial
// and with b.RunParallel, on one budget and cycling over 10,000. Every
// budget is used once before the timer starts, and then taken past its
// first seconds, so the 10,000-budget figures are the steady state, not
// the first use of each key.
func BenchmarkRedisAdmission(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, n := range redisBudgetCounts {
		for _, k := range redisKinds {
			for _, parallel := range []bool{false, true} {
				name := k.name + "/" + n.name + "/serial"
				if parallel {
					name = k.name + "/" + n.name + "/parallel"
				}
				b.Run(name, func(b *testing.B) {
					c := benchClient(b, srv)
					if err := c.FlushAll(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					admit := k.newAdmit(b, c)
					for _, key := range n.keys {
						if ok, err := admit(ctx, key); !ok || err != nil {
							b.Fatalf("warm-up on %s: admitted at once = %v, %v", key, ok, err)
						}
					}
					pastFirstUse()
					var next atomic.Uint64
					if err := c.ConfigResetStat(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					if !parallel {
						for i := 0; b.Loop(); i++ {
							if ok, err := admit(ctx, n.keys[i%len(n.keys)]); !ok || err != nil {
								b.Fatalf("admitted at once = %v, %v", ok, err)
							}
						}
					} else {
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								key := n.keys[next.Add(1)%uint64(len(n.keys))]
								if ok, err := admit(ctx, key); !ok || err != nil {
									b.Errorf("admitted at once = %v, %v", ok, err)
									return
								}
							}
						})
					}
					b.ReportMetric(scriptMicros(b, c)/float64(b.N), "server-µs/op")
				})
			}
		}
	}
}

// scriptMicros returns the µs the server spent running scripts and
// functions since its statistics were last reset (INFO commandstats):
// the server's share of a decision, less sensitive than a round trip to
// what else the machine is doing. The commands a script runs are in its
// time, and counted again under their own names, so only the scripts'
// are summed.
func scriptMicros(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch name {
		case "cmdstat_fcall", "cmdstat_evalsha", "cmdstat_eval":
		default:
			continue
		}
		for _, f := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("commandstats %q: %v", line, err)
				}
				total += n
			}
		}
	}
	return total
}

// BenchmarkRedisAdmissionPaired runs the four kinds of
// BenchmarkRedisAdmission serially, taking turns in blocks of 256 calls,
// each block timed (benchref.Paired), so that every kind sees the same
// background load. It reports each kind's ns per call and the ratios of
// the store's two strategies to evalsha and to redis_rate.
func BenchmarkRedisAdmissionPaired(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, n := range redisBudgetCounts {
		b.Run(n.name, func(b *testing.B) {
			c := benchClient(b, srv)
			if err := c.FlushAll(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			names := make([]string, len(redisKinds))
			kinds := make([]func() bool, len(redisKinds))
			for i, k := range redisKinds {
				admit := k.newAdmit(b, c)
				for _, key := range n.keys {
					if ok, err := admit(ctx, key); !ok || err != nil {
						b.Fatalf("%s warm-up on %s: admitted at once = %v, %v", k.name, key, ok, err)
					}
				}
				next := 0
				names[i] = k.name
				kinds[i] = func() bool {
					next++
					ok, err := admit(ctx, n.keys[next%len(n.keys)])
					return ok && err == nil
				}
			}
			pastFirstUse()
			benchref.Paired(b, names, kinds, 2)
		})
	}
}

// BenchmarkRedisMemory reports the Redis memory one budget takes once it
// is full: at the default limit of 400 per minute, 250 budgets get 400
// sends each, and the growth of INFO memory's used_memory is divided by 250
// (B/budget, and B/send; keys/budget likewise from DBSIZE); at 10,000 per
// minute, 10 budgets get 10,000 sends each. A linear budget is given a
// burst of 400, so that all 400 sends are admitted at once too. The store
// talks to Redis over a single connection, busy from the baseline to the
// end, so that the growth is the budgets' alone: the buffers of a
// connection count in used_memory, and Redis shrinks those of idle ones.
// ns/op is the time to fill the budgets, a by-product.
func BenchmarkRedisMemory(b *testing.B) {
	cases := []struct {
		name           string
		policy         store.Policy
		budgets, sends int
	}{
		{"window-400-per-minute", benchref.DefaultPolicy, 250, 400},
		{"linear-400-per-minute", store.Policy{Strategy: store.StrategyLinear, Limit: 400, Timespan: time.Minute, Burst: 400}, 250, 400},
		{"window-10000-per-minute", store.Policy{Strategy: store.StrategyWindow, Limit: 10_000, Timespan: time.Minute}, 10, 10_000},
	}
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			keys := benchref.BudgetKeys(c.budgets)
			client := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1})
			defer client.Close()
			b.ReportAllocs()
			var perBudget, keysPerBudget float64
			for b.Loop() {
				if err := client.FlushAll(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				s := redisstore.New(client, redisstore.Options{Failure: store.FailureClosed})
				// Loads the scripts before the baseline; the baseline
				// holds this one budget, which is not counted.
				if _, err := s.Reserve(ctx, "baseline", c.policy, store.Request{}); err != nil {
					b.Fatal(err)
				}
				base, baseKeys := redisUsedMemory(b, client), client.DBSize(ctx).Val()
				for _, key := range keys {
					for range c.sends {
						res, err := s.Reserve(ctx, key, c.policy, store.Request{})
						if err != nil || !res.OK || res.Wait != 0 {
							b.Fatalf("Reserve(%s) = %+v, %v; want admitted at once", key, res, err)
						}
					}
				}
				full, n := redisUsedMemory(b, client), client.DBSize(ctx).Val()
				perBudget = float64(full-base) / float64(c.budgets)
				keysPerBudget = float64(n-baseKeys) / float64(c.budgets)
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(perBudget, "B/budget")
			b.ReportMetric(perBudget/float64(c.sends), "B/send")
			b.ReportMetric(keysPerBudget, "keys/budget")
		})
	}
}

// redisUsedMemory returns INFO memory's used_memory.
func redisUsedMemory(tb testing.TB, c *redis.Client) int64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("INFO memory has no used_memory")
	return 0
}

// benchClient is the client every contender shares, with the timeouts the
// store's own clients have (redisstore.NewFromURL): every call bounded by
// 500ms, so that the store needs no per-call context.
func benchClient(b *testing.B, srv *redistest.Server) *redis.Client {
	const timeout = 500 * time.Millisecond
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: timeout, PoolTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// BenchmarkRedisMemoryQueue measures what a deep queue costs Redis: one
// budget at 400 per minute, full, with 2,000 requests waiting (five
// timespans' worth). Redis records the reservations of one timespan; the
// rest wait in-process (held requests). B/recorded is what each recorded
// reservation costs Redis, which every waiting request would cost were
// they all recorded.
func BenchmarkRedisMemoryQueue(b *testing.B) {
	const waiting = 2000
	srv := redistest.Start(b)
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1})
	defer client.Close()
	p := benchref.DefaultPolicy
	var queue, perRecorded, recorded float64
	for b.Loop() {
		if err := client.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		s := redisstore.New(client, redisstore.Options{Failure: store.FailureClosed})
		for range p.Limit {
			if res, err := s.Reserve(ctx, "queue", p, store.Request{}); err != nil || res.Wait != 0 {
				b.Fatalf("Reserve = %+v, %v; want admitted at once", res, err)
			}
		}
		full := redisUsedMemory(b, client)
		before := client.ZCard(ctx, redisstore.RedisKeys("queue")[0]).Val()
		for range waiting {
			if res, err := s.Reserve(ctx, "queue", p, store.Request{MaxWait: store.NoMaxWait}); err != nil || res.Wait == 0 {
				b.Fatalf("Reserve = %+v, %v; want a wait", res, err)
			}
		}
		queue = float64(redisUsedMemory(b, client) - full)
		recorded = float64(client.ZCard(ctx, redisstore.RedisKeys("queue")[0]).Val() - before)
		perRecorded = queue / max(recorded, 1)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(queue, "B/queue")
	b.ReportMetric(recorded, "recorded")
	b.ReportMetric(perRecorded, "B/recorded")
}
