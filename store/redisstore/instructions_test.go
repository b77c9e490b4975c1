package redisstore_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/k8sratelimit/k8sratelimit/internal/benchref"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// callgrindEnv enables BenchmarkRedisInstructions, and callgrindOutEnv,
// when set, names a directory to keep each kind's callgrind dump in, as
// callgrind.out.<kind>, for callgrind_annotate.
const (
	callgrindEnv    = "K8SRATELIMIT_CALLGRIND"
	callgrindOutEnv = "K8SRATELIMIT_CALLGRIND_OUT"
)

// BenchmarkRedisInstructions counts the instructions the Redis server
// runs per admission decision of each kind of BenchmarkRedisAdmission, on
// one budget, under valgrind's callgrind: unlike a time, the count does
// not move with whatever else the machine is doing, so the store's
// scripts and the references compare exactly, run after run. Valgrind
// slows the server fifty-fold, so this runs only when asked:
//
//	K8SRATELIMIT_CALLGRIND=1 go test -run '^$' -bench RedisInstructions -benchtime 1x ./store/redisstore/
//
// Each kind gets its own server; after a warm-up, the counters are zeroed,
// 1,000 decisions made and the counters dumped (callgrind_control).
// instructions/op is the server's whole count divided by the decisions:
// reading the request, the script, the reply; ns/op means nothing here.
func BenchmarkRedisInstructions(b *testing.B) {
	needCallgrind(b)
	for _, k := range append(slices.Clone(redisKinds), waiterKind, batchedSendsKind, oneStringKind) {
		b.Run(k.name, func(b *testing.B) { countInstructions(b, k) })
	}
}

// needCallgrind skips b unless callgrindEnv asks for it, and fails it
// when valgrind is missing.
func needCallgrind(b *testing.B) {
	b.Helper()
	if os.Getenv(callgrindEnv) != "1" {
		b.Skip("counts instructions under valgrind, fifty times slower: set " + callgrindEnv + "=1 to run it")
	}
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s not found on PATH: install valgrind (Debian/Ubuntu: apt-get install -y valgrind)", tool)
		}
	}
}

// countInstructions reports the instructions per admission of kind k on a
// server of its own under callgrind (see BenchmarkRedisInstructions).
func countInstructions(b *testing.B, k redisKind) {
	const warm, n = 300, 1000
	ctx := context.Background()
	dir := b.TempDir()
	out := filepath.Join(dir, "callgrind.out")
	srv := redistest.StartUnder(b, []string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + out})
	pid := strconv.Itoa(srv.Pid())
	// Valgrind's server is slow: generous timeouts, no retries.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: time.Minute,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, PoolTimeout: time.Minute})
	b.Cleanup(func() { _ = c.Close() })
	admit := k.newAdmit(b, c)
	decide := func(count int) {
		for range count {
			if ok, err := admit(ctx, benchref.Key); !ok || err != nil {
				b.Fatalf("admitted at once = %v, %v", ok, err)
			}
		}
	}
	decide(warm)
	pastFirstUse()
	callgrind(b, "-z", pid)
	decide(n)
	callgrind(b, "-d", pid)
	b.ReportMetric(float64(callgrindTotal(b, out+".1"))/n, "instructions/op")
	keepDump(b, out+".1", k.name)
}

// waiterKind is a request of a full window that waits for its slot: its
// reservation is recorded ahead, and confirmed when its waiter wakes at
// the slot (lua/confirm.lua), as every request of a budget that its rate
// holds back is. The store's clock is moved by the wait rather than
// slept through, and its presence lasts an hour, so that neither the
// wait nor a presence refresh is counted. The first request of the
// budget leaves at once.
var waiterKind = redisKind{"window-waiter", func(tb testing.TB, c *redis.Client) redisAdmit {
	s := redisstore.New(c, redisstore.Options{Failure: store.FailureClosed, Presence: time.Hour})
	tb.Cleanup(func() { _ = s.Close() })
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1, Timespan: time.Second}
	return func(ctx context.Context, key string) (bool, error) {
		res, err := s.Reserve(ctx, key, p, store.Request{MaxWait: store.NoMaxWait})
		if err != nil || !res.OK || res.Wait == 0 {
			return err == nil && res.OK, err
		}
		redisstore.Advance(s, res.Wait)
		left, err := s.Confirm(ctx, key, res.ID)
		return err == nil && left == 0, err
	}
}}

// batchedSendsKind is two processes whose requests wait for seats on one
// budget, as in the shared e2e run: each decision reserves a slot kept to
// be confirmed by Sent, the two stores taking turns, and every 32
// decisions the requests leave, the two processes' in turn, and each
// store records its 16 sends in one script (lua/sent.lua), each after its
// slot; the second store's land among the first's, late. Every decision
// makes its round trip. The timespan is a minute, so that no send goes stale during
// the count: the ring grows at the same decisions in every run.
var batchedSendsPolicy = store.Policy{Strategy: store.StrategyWindow, Limit: 1_000_000, Timespan: time.Minute}

var batchedSendsKind = redisKind{"window-2-processes-batched-sends", func(tb testing.TB, c *redis.Client) redisAdmit {
	var stores [2]*redisstore.Store
	for i := range stores {
		stores[i] = benchStore(tb, c)
	}
	var ids [2][]uint64
	turn := 0
	return func(ctx context.Context, key string) (bool, error) {
		st := turn % 2
		turn++
		res, err := stores[st].Reserve(ctx, key, batchedSendsPolicy, deferredAtOnce)
		if err != nil || !res.OK || res.Wait != 0 {
			return false, err
		}
		ids[st] = append(ids[st], res.ID)
		if turn%32 != 0 {
			return true, nil
		}
		for i := range ids[0] {
			stores[0].Sent(key, ids[0][i])
			stores[1].Sent(key, ids[1][i])
		}
		ids = [2][]uint64{}
		redisstore.FlushSent(stores[0])
		redisstore.FlushSent(stores[1])
		return true, nil
	}
}}

// oneStringKind is no decision of the store: it is what a window
// admission at once would cost at least on a layout that kept the hot
// field, the cooldown and the count of freed slots at the head of the
// ring's string, a reference as the bare EVALSHA is. Its function takes
// two keys (the ring's string and :w) and one argument, and runs only the
// commands such a decision needs, with none of the rules between them:
// TIME, a GETRANGE of the head, ZCARD, a SETRANGE of the send and one of
// the head, and returns four numbers in one string, as a reserve does.
var oneStringKind = redisKind{"one-string-layout-commands", func(tb testing.TB, c *redis.Client) redisAdmit {
	ctx := context.Background()
	if err := c.FunctionLoadReplace(ctx, oneStringLibrary).Err(); err != nil {
		tb.Fatal(err)
	}
	arg := packedFloats(1_000_000, 1e9, 1e4)
	made := map[string]bool{}
	return func(ctx context.Context, key string) (bool, error) {
		keys := []string{"{" + key + "}:v1:s", "{" + key + "}:v1:w"}
		if !made[key] {
			head := make([]byte, 64+1024*8) // a ring of 1,024 places
			copy(head[16:], packedFloats(1024))
			if err := c.Set(ctx, keys[0], head, 0).Err(); err != nil {
				return false, err
			}
			if err := c.ZAdd(ctx, keys[1], redis.Z{Member: "!"}).Err(); err != nil {
				return false, err
			}
			made[key] = true
		}
		v, err := c.FCall(ctx, "one_string_admit", keys, arg).Text()
		return err == nil && len(v) == 32 && v[:16] == string(packedFloats(1, 0)), err
	}
}}

// oneStringLibrary is oneStringKind's function.
const oneStringLibrary = `#!lua name=reference_one_string
local call, sunpack, spack
redis.register_function('one_string_admit', function(k, a)
  if not call then call, sunpack, spack = redis.call, struct.unpack, struct.pack end
  local S, W = k[1], k[2]
  local limit, maxwait, span = sunpack('>ddd', a[1])
  local t = call('TIME')
  local now = t[1] * 1000000 + t[2]
  local h, n, c, l, lim, last, cd, nf = sunpack('>dddddddd', call('GETRANGE', S, '0', '63'))
  local nw = call('ZCARD', W)
  local slot = now
  if cd > slot then slot = cd end
  if last > slot then slot = last end
  call('SETRANGE', S, 64 + (h + n) % c * 8, spack('>d', slot))
  if n == c then h = (h + 1) % c else n = n + 1 end
  call('SETRANGE', S, '0', spack('>dddddddd', h, n, c, slot, lim, slot, cd, nf))
  return spack('>dddd', 1, 0, now, slot)
end)
`

// packedFloats returns xs as big-endian doubles.
func packedFloats(xs ...float64) []byte {
	out := make([]byte, 0, 8*len(xs))
	for _, x := range xs {
		out = binary.BigEndian.AppendUint64(out, math.Float64bits(x))
	}
	return out
}

// keepDump copies the dump file of kind into callgrindOutEnv's directory,
// when set.
func keepDump(b *testing.B, file, kind string) {
	b.Helper()
	dir := os.Getenv(callgrindOutEnv)
	if dir == "" {
		return
	}
	data, err := os.ReadFile(file)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "callgrind.out."+kind), data, 0o644)
	}
	if err != nil {
		b.Fatalf("keeping the callgrind dump in %s: %v", dir, err)
	}
}

// callgrind runs callgrind_control with arg on the process pid.
func callgrind(b *testing.B, arg, pid string) {
	b.Helper()
	if out, err := exec.Command("callgrind_control", arg, pid).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control %s %s: %v\n%s", arg, pid, err, out)
	}
}

// callgrindTotal returns the instruction count of the dump file, waiting
// for callgrind to finish writing it.
func callgrindTotal(b *testing.B, file string) int64 {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		data, err := os.ReadFile(file)
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(line, "totals: "); ok {
					n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
					if err != nil {
						b.Fatalf("%s: %q: %v", file, line, err)
					}
					return n
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("no totals in %s after a minute: %v", file, err)
		}
		time.Sleep(100 * time.Millisecond) // polling a file another process writes
	}
}
