package redisstore_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// The differential test gives the same random sequences of calls to the
// memory store and to the Redis store and requires the same decisions of
// both.
//
// Time moves in whole steps, and every MaxWait lies half a step from the
// grid, so that the real time the Redis store sees pass between calls (far
// less than a step) moves a wait within the tolerance but never across a
// MaxWait. The memory store's clock ticks diffTick before every call, as
// real time does for the Redis store, so that both see an instant recorded
// by an earlier call as past, never as now.
const (
	diffStep      = 10 * time.Second
	diffTick      = time.Microsecond
	diffTolerance = time.Second
	diffKey       = "k8s:default:differential"
	diffSequences = 200 // per run, the strategies alternating
)

var (
	diffSeed    = flag.Uint64("differential.seed", 0, "run only the differential sequence of this seed")
	diffExplore = flag.Bool("differential.explore", false, "run differential sequences from a random seed instead of seed 1")
	diffCount   = flag.Uint64("differential.sequences", diffSequences, "how many differential sequences to run")
)

type diffKind uint8

const (
	opReserve     diffKind = iota
	opConfirm              // confirm a reservation now, early or late
	opWake                 // move time to a reservation's slot, late by d, and confirm it
	opRelease              // release a reservation
	opSetCooldown          // set a cooldown of d
	opCooldown             // read the cooldown left
	opAdvance              // move time by d
)

// diffOp is one call, or a move of time. pick chooses a reservation among
// those that hold an ID: the live ones, or all of them when spent is set.
type diffOp struct {
	kind    diffKind
	maxWait time.Duration
	jitter  time.Duration
	d       time.Duration
	pick    int
	spent   bool
}

// diffCase is one sequence of calls on one budget.
type diffCase struct {
	policy store.Policy
	queue  bool // waits may go beyond a timespan
	free   bool // plays every call, even those diffKnown keeps out
	ops    []diffOp
}

// halfSteps returns a MaxWait of n and a half steps.
func halfSteps(n int) time.Duration { return time.Duration(n)*diffStep + diffStep/2 }

// generate returns the random sequence of seed, with limits small enough
// to be exercised: window budgets for even seeds, linear ones for odd.
//
// Two seeds in four keep every wait within a timespan (every MaxWait
// below it), where the Redis store records every reservation in Redis,
// and exercise everything: jitter, releases, cooldowns, late
// confirmations. The others queue requests further ahead, which the Redis
// store holds in-process and records when their slots come within a
// timespan, with no cooldown: a cooldown there still parts the stores on
// some sequences, on which the real time passing between calls decides
// (they do not reduce to a case that fails every time).
func generate(seed uint64) diffCase {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	queue := seed%4 >= 2
	limit := 1 + rng.IntN(5)
	c := diffCase{queue: queue}
	span := 1 + rng.IntN(4) // steps
	if seed%2 == 0 {
		c.policy = store.Policy{Strategy: store.StrategyWindow, Limit: limit, Timespan: time.Duration(span) * diffStep}
	} else {
		interval := 1 + rng.IntN(2)
		span = limit * interval
		c.policy = store.Policy{Strategy: store.StrategyLinear, Limit: limit, Timespan: time.Duration(span) * diffStep, Burst: rng.IntN(4)}
	}
	steps := func(n int) time.Duration { return time.Duration(rng.IntN(n)) * diffStep }
	for range 30 + rng.IntN(31) {
		var o diffOp
		switch x := rng.IntN(100); {
		case x < 40:
			o.kind = opReserve
			switch y := rng.IntN(10); {
			case y == 0:
				o.maxWait = 0
			case queue && y < 4:
				o.maxWait = halfSteps(rng.IntN(3 * span))
			case queue:
				o.maxWait = store.NoMaxWait
			default:
				o.maxWait = halfSteps(rng.IntN(span))
			}
			if rng.IntN(2) == 0 {
				o.jitter = steps(3)
			}
		case x < 55:
			o.kind = opConfirm
		case x < 65:
			o.kind = opWake
			o.d = steps(span + 1)
		case x < 75:
			o.kind = opRelease
		case x < 81 && !queue:
			o.kind, o.d = opSetCooldown, steps(2*span+1)
		case x < 84:
			o.kind = opCooldown
		default:
			o.kind, o.d = opAdvance, diffStep+steps(span+1)
		}
		o.pick, o.spent = rng.IntN(1000), rng.IntN(10) == 0
		c.ops = append(c.ops, o)
	}
	return c
}

// diffReservation is a reservation both stores gave an ID.
type diffReservation struct {
	mem, red uint64
	slot     time.Duration // memory store time, as last reported
	spent    bool          // confirmed to send, or released
}

// diffRun is one sequence being played on both stores.
type diffRun struct {
	ctx   context.Context
	p     store.Policy
	clk   *clocktesting.FakePassiveClock
	start time.Time
	mem   *memorystore.Store
	red   *redisstore.Store
	fell  atomic.Pointer[store.Event]
	held  []*diffReservation
	queue bool
	free  bool
}

// play plays c on a fresh memory store and a fresh Redis store on client,
// and returns the first disagreement, as an error naming the call.
func play(t *testing.T, client *redis.Client, c diffCase) error {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.FlushAll(ctx).Err())
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &diffRun{ctx: ctx, p: c.policy, queue: c.queue, free: c.free, clk: clocktesting.NewFakePassiveClock(start), start: start}
	r.mem = memorystore.New(r.clk)
	// A long presence and timeout keep the store's background and its
	// failure policy out of the decisions.
	r.red = redisstore.New(client, redisstore.Options{Presence: time.Hour, Timeout: 10 * time.Second, OnEvent: func(e store.Event) {
		r.fell.CompareAndSwap(nil, &e)
	}})
	defer func() { require.NoError(t, r.red.Close()) }()
	for i, o := range c.ops {
		err := r.apply(o)
		if errors.Is(err, errUndecided) {
			return nil // the rest of the sequence would compare different budgets
		}
		if err != nil {
			return fmt.Errorf("op %d %s: %w", i, o, err)
		}
		if e := r.fell.Load(); e != nil {
			require.FailNowf(t, "the Redis store did not answer", "op %d %s: %s %v", i, o, e.Type, e.Err)
		}
	}
	return nil
}

// lateness returns how late a confirmation of a window reservation may
// come: less than a timespan. One a timespan late or more may have left
// the window and take a slot again; the stores still part on some such
// sequences (seed 2374, were they let through), which do not reduce to a
// case that fails every time. A linear one may come however late.
func (r *diffRun) lateness() time.Duration { return r.p.Timespan - diffStep/2 }

// now returns the memory store's time since the sequence started.
func (r *diffRun) now() time.Duration { return r.clk.Since(r.start) }

// advance moves both stores' time by d, a whole number of steps, one step
// at a time: the Redis store records the requests it holds in-process when
// their slots come within a timespan, on a timer of real time that moving
// its time does not fire.
func (r *diffRun) advance(d time.Duration) error {
	for ; d > 0; d -= diffStep {
		r.clk.SetTime(r.clk.Now().Add(diffStep))
		redisstore.Advance(r.red, diffStep)
		if err := redisstore.PromoteDue(r.red); err != nil {
			return err
		}
	}
	return nil
}

// choose returns the reservation o picks, nil when there is none.
func (r *diffRun) choose(o diffOp) *diffReservation {
	var among []*diffReservation
	for _, x := range r.held {
		if o.spent || !x.spent {
			among = append(among, x)
		}
	}
	if len(among) == 0 {
		return nil
	}
	return among[o.pick%len(among)]
}

func (r *diffRun) apply(o diffOp) error {
	r.clk.SetTime(r.clk.Now().Add(diffTick))
	switch o.kind {
	case opReserve:
		now := r.now()
		m, err := r.mem.Reserve(r.ctx, diffKey, r.p, store.Request{MaxWait: o.maxWait, Jitter: o.jitter})
		if err != nil {
			return err
		}
		d, err := r.red.Reserve(r.ctx, diffKey, r.p, store.Request{MaxWait: o.maxWait, Jitter: o.jitter})
		if err != nil {
			return err
		}
		if m.OK != d.OK && o.maxWait != store.NoMaxWait && near(m.Wait, o.maxWait) && near(d.Wait, o.maxWait) {
			// A slot at the MaxWait itself (a jitter cut short there, its
			// slot released and moved by whole steps): the time the Redis
			// store sees pass decides it either way.
			return errUndecided
		}
		if m.OK != d.OK || m.Cooldown != d.Cooldown || (m.ID != 0) != (d.ID != 0) || (m.Wait != 0) != (d.Wait != 0) || !near(m.Wait, d.Wait) {
			return fmt.Errorf("memory %+v, redis %+v", m, d)
		}
		if m.ID != 0 {
			r.held = append(r.held, &diffReservation{mem: m.ID, red: d.ID, slot: now + m.Wait})
		}
	case opWake, opConfirm:
		x := r.choose(o)
		if x == nil {
			return nil
		}
		if o.kind == opWake {
			if err := r.advance(max(x.slot-r.now()+diffStep-1, 0)/diffStep*diffStep + o.d); err != nil {
				return err
			}
		}
		if !r.free && !x.spent && r.p.Strategy == store.StrategyWindow && r.now()-x.slot >= r.lateness() {
			return nil // see lateness
		}
		now := r.now()
		m, merr := r.mem.Confirm(r.ctx, diffKey, x.mem)
		d, derr := r.red.Confirm(r.ctx, diffKey, x.red)
		if !sameErr(merr, derr) || (m != 0) != (d != 0) || !near(m, d) {
			return fmt.Errorf("memory %v, %v; redis %v, %v", m, merr, d, derr)
		}
		x.slot, x.spent = now+m, x.spent || (merr == nil && m == 0)
	case opRelease:
		x := r.choose(o)
		if x == nil || (!r.free && r.p.Strategy == store.StrategyWindow && r.now() >= x.slot) {
			return nil // see diffKnown on releases after the slot
		}
		merr, derr := r.mem.Release(r.ctx, diffKey, x.mem), r.red.Release(r.ctx, diffKey, x.red)
		if merr != nil || derr != nil {
			return fmt.Errorf("memory %v, redis %v", merr, derr)
		}
		x.spent = true
	case opSetCooldown:
		m, merr := r.mem.SetCooldown(r.ctx, diffKey, r.p, o.d)
		d, derr := r.red.SetCooldown(r.ctx, diffKey, r.p, o.d)
		if merr != nil || derr != nil || !near(m, d) {
			return fmt.Errorf("memory %v, %v; redis %v, %v", m, merr, d, derr)
		}
	case opCooldown:
		m, merr := r.mem.Cooldown(r.ctx, diffKey)
		d, derr := r.red.Cooldown(r.ctx, diffKey)
		if merr != nil || derr != nil || (m != 0) != (d != 0) || !near(m, d) {
			return fmt.Errorf("memory %v, %v; redis %v, %v", m, merr, d, derr)
		}
	case opAdvance:
		return r.advance(o.d)
	}
	return nil
}

// errUndecided reports a decision that the real time passing between
// the calls may tip either way, on which the stores may part.
var errUndecided = errors.New("undecided")

func near(a, b time.Duration) bool { return (a - b).Abs() <= diffTolerance }

// sameErr reports whether both stores answered alike: both without error,
// or both that the reservation is unknown.
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return errors.Is(a, store.ErrUnknownReservation) && errors.Is(b, store.ErrUnknownReservation)
}

// shrink removes calls from a failing case as long as it keeps failing.
func shrink(c diffCase, fails func(diffCase) bool) diffCase {
	for chunk := len(c.ops) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(c.ops); {
			try := diffCase{policy: c.policy, queue: c.queue, free: c.free, ops: append(append([]diffOp(nil), c.ops[:i]...), c.ops[i+chunk:]...)}
			if fails(try) {
				c = try
				continue
			}
			i++
		}
	}
	return c
}

func (o diffOp) String() string {
	switch o.kind {
	case opReserve:
		return fmt.Sprintf("reserveOp(%d, %d)", o.maxWait, o.jitter)
	case opConfirm:
		return fmt.Sprintf("confirmOp(%d, %t)", o.pick, o.spent)
	case opWake:
		return fmt.Sprintf("wakeOp(%d, %d, %t)", o.d, o.pick, o.spent)
	case opRelease:
		return fmt.Sprintf("releaseOp(%d, %t)", o.pick, o.spent)
	case opSetCooldown:
		return fmt.Sprintf("setCooldownOp(%d)", o.d)
	case opCooldown:
		return "cooldownOp()"
	default:
		return fmt.Sprintf("advanceOp(%d)", o.d)
	}
}

func reserveOp(maxWait, jitter time.Duration) diffOp {
	return diffOp{kind: opReserve, maxWait: maxWait, jitter: jitter}
}
func confirmOp(pick int, spent bool) diffOp { return diffOp{kind: opConfirm, pick: pick, spent: spent} }
func wakeOp(late time.Duration, pick int, spent bool) diffOp {
	return diffOp{kind: opWake, d: late, pick: pick, spent: spent}
}
func releaseOp(pick int, spent bool) diffOp { return diffOp{kind: opRelease, pick: pick, spent: spent} }
func setCooldownOp(d time.Duration) diffOp  { return diffOp{kind: opSetCooldown, d: d} }
func cooldownOp() diffOp                    { return diffOp{kind: opCooldown} }
func advanceOp(d time.Duration) diffOp      { return diffOp{kind: opAdvance, d: d} }

// GoString writes the case as Go, for the table of regressions.
func (c diffCase) GoString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{policy: store.Policy{Strategy: %q, Limit: %d, Timespan: %d, Burst: %d}, queue: %t, ops: []diffOp{\n",
		c.policy.Strategy, c.policy.Limit, c.policy.Timespan, c.policy.Burst, c.queue)
	for _, o := range c.ops {
		fmt.Fprintf(&b, "\t%s,\n", o)
	}
	b.WriteString("}}")
	return b.String()
}

func TestDifferentialMemoryRedis(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	for name, c := range diffRegressions {
		t.Run(name, func(t *testing.T) {
			assert.NoError(t, play(t, client, c))
		})
	}
	for name, c := range diffKnown {
		t.Run("Known"+name, func(t *testing.T) {
			assert.Error(t, play(t, client, c), "the stores now agree: move the case to diffRegressions")
		})
	}

	// The same seeds every run, so that a run of make test fails only on a
	// change; -differential.explore looks for new disagreements.
	first, n := uint64(1), max(*diffCount, 1)
	switch {
	case *diffSeed != 0:
		first, n = *diffSeed, 1
	case *diffExplore:
		first = rand.Uint64() >> 1
	}
	t.Logf("seeds %d to %d; run one again with go test ./store -run TestDifferentialMemoryRedis -args -differential.seed=SEED", first, first+n-1)
	calls := 0
	for seed := first; seed < first+n; seed++ {
		c := generate(seed)
		calls += len(c.ops)
		err := play(t, client, c)
		if err == nil {
			continue
		}
		small := shrink(c, func(c diffCase) bool { return play(t, client, c) != nil })
		t.Fatalf("seed %d: the stores disagree: %v\nreduced to %d calls: %v\n%#v",
			seed, err, len(small.ops), play(t, client, small), small)
	}
	t.Logf("%d sequences, %d calls", n, calls)
}
