// Package storetest is the conformance suite that every store.Store
// passes: the in-memory store, and any shared store, run the same tests for
// both strategies.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Harness {
//			c := clocktesting.NewFakeClock(time.Now())
//			return storetest.Harness{Store: memorystore.New(c), Advance: c.Step}
//		})
//	}
package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// Harness is one fresh store under test and the means to move its time.
type Harness struct {
	// Store is the store under test, with no budgets yet.
	Store store.Store
	// Advance moves the store's time forward by d.
	Advance func(d time.Duration)
	// Tolerance is how far a reported wait may be from the exact one, for
	// stores whose time runs on while the test talks to them. 0 for a
	// store on a fake clock.
	Tolerance time.Duration
	// Now, when set, returns the store's time (from any origin), for a
	// store whose time runs on: the suite then turns waits into instants.
	Now func() time.Duration
}

// now returns the harness's store time, 0 when its time stands still.
func (h Harness) now() time.Duration {
	if h.Now == nil {
		return 0
	}
	return h.Now()
}

// Run runs the conformance suite. newHarness is called once per test and
// must return a store with no budgets.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"WindowAdmitsLimitThenDefers", testWindowAdmitsLimitThenDefers},
		{"WindowSlides", testWindowSlides},
		{"MaxWaitRefusesAndReservesNothing", testMaxWaitRefuses},
		{"MaxWaitZeroNeverWaits", testMaxWaitZero},
		{"ConfirmAtSlot", testConfirmAtSlot},
		{"DeferredAtOnceCountsFromNowAndSendsWhenConfirmed", testDeferredAtOnce},
		{"DeferredAtOnceLinearHasNoID", testDeferredLinear},
		{"LateSendMovesCrowdedReservations", testLateSend},
		{"LateWaitersWokenTogetherLeaveApart", testLateWaitersTogether},
		{"LateWaitersConfirmingOutOfOrderLeaveApart", testLateWaitersOutOfOrder},
		{"WaiterMoreThanATimespanLateIsCounted", testWaiterATimespanLate},
		{"LateWaiterWaitsOutACooldownSetAfterItsSlot", testLateWaiterCooldown},
		{"ReleaseFreesSlotForNewcomer", testReleaseFreesSlot},
		{"CooldownDefersAndOnlyExtends", testCooldownOnlyExtends},
		{"CooldownMovesOutstandingReservations", testCooldownMovesReservations},
		{"JitterOnlyForDeferred", testJitter},
		{"JitterDoesNotPileUp", testJitterDoesNotPileUp},
		{"LinearSpacing", testLinearSpacing},
		{"LinearBurst", testLinearBurst},
		{"LinearReleaseFreesSlot", testLinearRelease},
		{"LinearCooldownMovesReservations", testLinearCooldown},
		{"KeysAreIndependent", testKeysIndependent},
		{"ConcurrentWindowIsExact", testConcurrentWindow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newHarness(t))
		})
	}
}

var ctx = context.Background()

func windowPolicy(limit int, span time.Duration) store.Policy {
	return store.Policy{Strategy: store.StrategyWindow, Limit: limit, Timespan: span}
}

func linearPolicy(limit int, span time.Duration, burst int) store.Policy {
	return store.Policy{Strategy: store.StrategyLinear, Limit: limit, Timespan: span, Burst: burst}
}

var anyWait = store.Request{MaxWait: store.NoMaxWait}

// reserve reserves one slot and requires the store to answer.
func reserve(t *testing.T, h Harness, key string, p store.Policy, r store.Request) store.Reservation {
	t.Helper()
	res, err := h.Store.Reserve(ctx, key, p, r)
	require.NoError(t, err)
	return res
}

// near asserts that got is want within the harness's tolerance.
func near(t *testing.T, h Harness, want, got time.Duration, msgAndArgs ...any) {
	t.Helper()
	assert.InDelta(t, float64(want), float64(got), float64(h.Tolerance), msgAndArgs...)
}

func testWindowAdmitsLimitThenDefers(t *testing.T, h Harness) {
	p := windowPolicy(3, 10*time.Second)
	for i := range 3 {
		res := reserve(t, h, "k", p, anyWait)
		assert.True(t, res.OK)
		assert.Zero(t, res.ID, "request %d admitted at once has no ID", i)
		near(t, h, 0, res.Wait, "request %d", i)
	}
	for i, want := range []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, 20 * time.Second} {
		res := reserve(t, h, "k", p, anyWait)
		assert.True(t, res.OK)
		assert.NotZero(t, res.ID)
		near(t, h, want, res.Wait, "deferred request %d", i)
	}
}

func testWindowSlides(t *testing.T, h Harness) {
	p := windowPolicy(2, 10*time.Second)
	near(t, h, 0, reserve(t, h, "k", p, anyWait).Wait)
	h.Advance(4 * time.Second)
	near(t, h, 0, reserve(t, h, "k", p, anyWait).Wait)
	c := reserve(t, h, "k", p, anyWait)
	near(t, h, 6*time.Second, c.Wait, "the first send leaves the window at 10s")
	d := reserve(t, h, "k", p, anyWait)
	near(t, h, 10*time.Second, d.Wait, "the second send leaves the window at 14s")
	h.Advance(10 * time.Second)
	near(t, h, 6*time.Second, reserve(t, h, "k", p, anyWait).Wait, "at 14s the window holds the sends at 10s and 14s")
	h.Advance(20 * time.Second)
	near(t, h, 0, reserve(t, h, "k", p, anyWait).Wait, "every earlier send is out of the window at 34s")
}

func testMaxWaitRefuses(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	res := reserve(t, h, "k", p, store.Request{MaxWait: 5 * time.Second})
	assert.False(t, res.OK)
	assert.Zero(t, res.ID)
	near(t, h, 10*time.Second, res.Wait, "a refusal says how long the wait would have been")

	res = reserve(t, h, "k", p, anyWait)
	assert.True(t, res.OK)
	near(t, h, 10*time.Second, res.Wait, "the refused request reserved nothing")

	res = reserve(t, h, "k", p, store.Request{MaxWait: 25 * time.Second})
	assert.True(t, res.OK)
	near(t, h, 20*time.Second, res.Wait)
}

func testMaxWaitZero(t *testing.T, h Harness) {
	p := windowPolicy(1, time.Minute)
	assert.True(t, reserve(t, h, "k", p, store.Request{MaxWait: 0}).OK)
	res := reserve(t, h, "k", p, store.Request{MaxWait: 0})
	assert.False(t, res.OK)
	near(t, h, time.Minute, res.Wait)
}

func testConfirmAtSlot(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	res := reserve(t, h, "k", p, anyWait)
	require.NotZero(t, res.ID)

	h.Advance(4 * time.Second)
	left, err := h.Store.Confirm(ctx, "k", res.ID)
	require.NoError(t, err)
	near(t, h, 6*time.Second, left, "confirming early reports the time left")

	h.Advance(6*time.Second + h.Tolerance)
	left, err = h.Store.Confirm(ctx, "k", res.ID)
	require.NoError(t, err)
	assert.Zero(t, left, "confirming at the slot sends")

	_, err = h.Store.Confirm(ctx, "k", res.ID)
	assert.ErrorIs(t, err, store.ErrUnknownReservation, "a confirmed reservation is spent")
	_, err = h.Store.Confirm(ctx, "other", 12345)
	assert.ErrorIs(t, err, store.ErrUnknownReservation)
}

// testDeferredAtOnce checks that a reservation asked to be confirmed is
// one even when its slot is now: it counts from the moment it is made, and
// its Confirm records the send where it really leaves, moving the
// reservations it crowds.
func testDeferredAtOnce(t *testing.T, h Harness) {
	p := windowPolicy(2, 10*time.Second)
	deferred := store.Request{MaxWait: store.NoMaxWait, Deferred: true}
	a := reserve(t, h, "k", p, deferred)
	require.True(t, a.OK)
	near(t, h, 0, a.Wait, "the slot is now")
	require.NotZero(t, a.ID, "a deferred reservation has an ID even at once")

	h.Advance(time.Second)
	reserve(t, h, "k", p, anyWait)
	c := reserve(t, h, "k", p, anyWait)
	near(t, h, 9*time.Second, c.Wait, "the deferred reservation counts from when it was made, at 0s")

	h.Advance(2 * time.Second) // it leaves at 3s
	left, err := h.Store.Confirm(ctx, "k", a.ID)
	require.NoError(t, err)
	near(t, h, 0, left, "its slot has come: it sends at once")
	left, err = h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	near(t, h, 8*time.Second, left, "the reservation it crowds moves: the window's two sends are now at 1s and 3s, so it comes at 11s")
	_, err = h.Store.Confirm(ctx, "k", a.ID)
	assert.ErrorIs(t, err, store.ErrUnknownReservation, "a confirmed reservation is spent")
}

// testDeferredLinear checks that linear pacing, which never moves a late
// send, ignores the request to confirm an at-once reservation.
func testDeferredLinear(t *testing.T, h Harness) {
	res := reserve(t, h, "k", linearPolicy(1, time.Second, 1), store.Request{MaxWait: store.NoMaxWait, Deferred: true})
	require.True(t, res.OK)
	near(t, h, 0, res.Wait)
	assert.Zero(t, res.ID, "nothing to confirm")
}

// testLateSend checks that the window holds on the instants requests
// really leave: a waiter that confirms late moves the reservations its late
// send would crowd.
func testLateSend(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	c := reserve(t, h, "k", p, anyWait)
	near(t, h, 20*time.Second, c.Wait)

	h.Advance(12 * time.Second)
	left, err := h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	assert.Zero(t, left, "a late waiter sends at once")

	left, err = h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	near(t, h, 10*time.Second, left, "the next send comes one timespan after the late one, at 22s")
	near(t, h, 20*time.Second, reserve(t, h, "k", p, anyWait).Wait, "newcomers queue after it")
}

// testWaiterATimespanLate checks that a waiter whose timer fires more
// than a timespan late, after a newcomer's reservation dropped its old
// entry from the window, is still counted: it does not leave beside the
// newcomer, but a timespan after it.
func testWaiterATimespanLate(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	near(t, h, 10*time.Second, b.Wait)

	h.Advance(25 * time.Second) // b's waiter wakes 15s late, at 25s
	c := reserve(t, h, "k", p, anyWait)
	assert.Zero(t, c.Wait, "the window is empty at 25s: a newcomer sends at once")
	left, err := h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	near(t, h, 10*time.Second, left, "the late waiter leaves a timespan after the newcomer, at 35s, not beside it")
}

// testLateWaiterCooldown checks that a waiter whose slot came before a
// cooldown was set, and who confirms while it lasts, leaves at its end:
// the cooldown moved only the slots still ahead, but nothing is sent
// while one lasts.
func testLateWaiterCooldown(t *testing.T, h Harness) {
	for _, p := range []store.Policy{windowPolicy(1, 10*time.Second), linearPolicy(1, 10*time.Second, 1)} {
		t.Run(string(p.Strategy), func(t *testing.T) {
			key := "k-" + string(p.Strategy)
			reserve(t, h, key, p, anyWait)
			b := reserve(t, h, key, p, anyWait)
			near(t, h, 10*time.Second, b.Wait)

			h.Advance(11 * time.Second) // b's slot came at 10s; its waiter is late
			_, err := h.Store.SetCooldown(ctx, key, p, 5*time.Second)
			require.NoError(t, err)
			left, err := h.Store.Confirm(ctx, key, b.ID)
			require.NoError(t, err)
			near(t, h, 5*time.Second, left, "it leaves when the cooldown ends, at 16s")

			h.Advance(5*time.Second + h.Tolerance)
			left, err = h.Store.Confirm(ctx, key, b.ID)
			require.NoError(t, err)
			assert.Zero(t, left)
		})
	}
}

// testLateWaitersTogether checks that waiters whose timers fire late
// together - after a pause of the process, say - do not all leave
// together: the first to confirm moves the others' due slots on.
func testLateWaitersTogether(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	near(t, h, 10*time.Second, b.Wait)
	h.Advance(10 * time.Second)
	c := reserve(t, h, "k", p, anyWait)
	near(t, h, 10*time.Second, c.Wait, "the next slot is at 20s")

	h.Advance(15 * time.Second) // both waiters wake late, at 25s
	left, err := h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	assert.Zero(t, left, "the first late waiter sends at once")
	left, err = h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	near(t, h, 10*time.Second, left, "the second waits a timespan after the first's late send, to 35s")
}

// testLateWaitersOutOfOrder checks that a late waiter whose later
// neighbour confirmed first waits a timespan after that send.
func testLateWaitersOutOfOrder(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	h.Advance(10 * time.Second)
	c := reserve(t, h, "k", p, anyWait)
	near(t, h, 10*time.Second, c.Wait, "the next slot is at 20s")

	h.Advance(15 * time.Second) // both wake late, at 25s; the later goes first
	left, err := h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	assert.Zero(t, left, "the later waiter sends at once")
	left, err = h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	near(t, h, 10*time.Second, left, "the earlier waits a timespan after that send, to 35s")
	left, err = h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	near(t, h, 10*time.Second, left, "and still holds its slot")
}

func testReleaseFreesSlot(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	c := reserve(t, h, "k", p, anyWait)
	near(t, h, 10*time.Second, b.Wait)
	near(t, h, 20*time.Second, c.Wait)

	require.NoError(t, h.Store.Release(ctx, "k", b.ID))
	require.NoError(t, h.Store.Release(ctx, "k", b.ID), "releasing twice does nothing")
	_, err := h.Store.Confirm(ctx, "k", b.ID)
	assert.ErrorIs(t, err, store.ErrUnknownReservation)

	d := reserve(t, h, "k", p, anyWait)
	near(t, h, 10*time.Second, d.Wait, "a newcomer takes the freed slot")
	left, err := h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	near(t, h, 20*time.Second, left, "a queued waiter keeps its slot")

	e := reserve(t, h, "k", p, anyWait)
	near(t, h, 30*time.Second, e.Wait, "the freed slot is taken once")
}

func testCooldownOnlyExtends(t *testing.T, h Harness) {
	p := windowPolicy(100, time.Minute)
	left, err := h.Store.SetCooldown(ctx, "k", p, 5*time.Second)
	require.NoError(t, err)
	near(t, h, 5*time.Second, left)

	left, err = h.Store.SetCooldown(ctx, "k", p, time.Second)
	require.NoError(t, err)
	near(t, h, 5*time.Second, left, "a shorter cooldown does not shorten it")

	left, err = h.Store.Cooldown(ctx, "k")
	require.NoError(t, err)
	near(t, h, 5*time.Second, left)

	res := reserve(t, h, "k", p, anyWait)
	assert.True(t, res.OK)
	assert.True(t, res.Cooldown)
	near(t, h, 5*time.Second, res.Wait, "nothing is sent during a cooldown")

	res = reserve(t, h, "k", p, store.Request{MaxWait: time.Second})
	assert.False(t, res.OK)
	assert.True(t, res.Cooldown)

	h.Advance(5*time.Second + h.Tolerance)
	left, err = h.Store.Cooldown(ctx, "k")
	require.NoError(t, err)
	assert.Zero(t, left)
	res = reserve(t, h, "k", p, anyWait)
	assert.False(t, res.Cooldown)
	near(t, h, 0, res.Wait)

	left, err = h.Store.Cooldown(ctx, "never-used")
	require.NoError(t, err)
	assert.Zero(t, left)
}

func testCooldownMovesReservations(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	c := reserve(t, h, "k", p, anyWait)

	_, err := h.Store.SetCooldown(ctx, "k", p, 5*time.Second)
	require.NoError(t, err)
	left, err := h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	near(t, h, 10*time.Second, left, "a cooldown ending before the earliest reservation moves nothing")

	_, err = h.Store.SetCooldown(ctx, "k", p, 15*time.Second)
	require.NoError(t, err)
	left, err = h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	near(t, h, 15*time.Second, left, "the earliest reservation starts at the cooldown's end")
	left, err = h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	near(t, h, 25*time.Second, left, "later reservations keep their spacing")

	d := reserve(t, h, "k", p, anyWait)
	near(t, h, 35*time.Second, d.Wait, "newcomers queue after the moved reservations")
}

func testJitter(t *testing.T, h Harness) {
	p := windowPolicy(1, 10*time.Second)
	a := reserve(t, h, "k", p, store.Request{MaxWait: store.NoMaxWait, Jitter: 3 * time.Second})
	near(t, h, 0, a.Wait, "a request admitted at once never gets jitter")

	b := reserve(t, h, "k", p, store.Request{MaxWait: store.NoMaxWait, Jitter: 3 * time.Second})
	near(t, h, 13*time.Second, b.Wait, "a deferred request is reserved at its slot plus jitter")

	c := reserve(t, h, "k", p, anyWait)
	near(t, h, 23*time.Second, c.Wait, "the jittered instant is the send instant the window counts")

	d := reserve(t, h, "k", p, store.Request{MaxWait: 34 * time.Second, Jitter: 3 * time.Second})
	assert.True(t, d.OK, "jitter never turns an acceptable wait into a refusal")
	near(t, h, 34*time.Second, d.Wait)
}

// testJitterDoesNotPileUp checks that requests due together are each
// moved by their own jitter only, not by the jitter of those before them.
func testJitterDoesNotPileUp(t *testing.T, h Harness) {
	p := windowPolicy(3, 10*time.Second)
	for range 3 {
		reserve(t, h, "k", p, anyWait)
	}
	jittered := store.Request{MaxWait: store.NoMaxWait, Jitter: 2 * time.Second}
	for i := range 3 {
		near(t, h, 12*time.Second, reserve(t, h, "k", p, jittered).Wait, "deferred request %d", i)
	}
	near(t, h, 22*time.Second, reserve(t, h, "k", p, anyWait).Wait, "the window still counts the jittered instants")
}

func testLinearSpacing(t *testing.T, h Harness) {
	p := linearPolicy(10, time.Second, 0)
	for i := range 5 {
		res := reserve(t, h, "k", p, anyWait)
		assert.True(t, res.OK)
		near(t, h, time.Duration(i)*100*time.Millisecond, res.Wait, "request %d", i)
	}
	h.Advance(time.Second)
	near(t, h, 0, reserve(t, h, "k", p, anyWait).Wait, "an idle budget admits at once")
}

func testLinearBurst(t *testing.T, h Harness) {
	p := linearPolicy(10, time.Second, 3)
	for i, want := range []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond} {
		near(t, h, want, reserve(t, h, "k", p, anyWait).Wait, "request %d", i)
	}
	res := reserve(t, h, "k", p, store.Request{MaxWait: 250 * time.Millisecond})
	assert.False(t, res.OK)
	near(t, h, 300*time.Millisecond, res.Wait)
}

func testLinearRelease(t *testing.T, h Harness) {
	p := linearPolicy(10, time.Second, 0)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	c := reserve(t, h, "k", p, anyWait)
	require.NoError(t, h.Store.Release(ctx, "k", b.ID))

	d := reserve(t, h, "k", p, anyWait)
	near(t, h, 100*time.Millisecond, d.Wait, "a newcomer takes the freed slot")
	left, err := h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	near(t, h, 200*time.Millisecond, left, "a queued waiter keeps its slot")
	near(t, h, 300*time.Millisecond, reserve(t, h, "k", p, anyWait).Wait)
}

func testLinearCooldown(t *testing.T, h Harness) {
	p := linearPolicy(10, time.Second, 0)
	reserve(t, h, "k", p, anyWait)
	b := reserve(t, h, "k", p, anyWait)
	c := reserve(t, h, "k", p, anyWait)

	_, err := h.Store.SetCooldown(ctx, "k", p, time.Second)
	require.NoError(t, err)
	left, err := h.Store.Confirm(ctx, "k", b.ID)
	require.NoError(t, err)
	near(t, h, time.Second, left)
	left, err = h.Store.Confirm(ctx, "k", c.ID)
	require.NoError(t, err)
	near(t, h, 1100*time.Millisecond, left)
	near(t, h, 1200*time.Millisecond, reserve(t, h, "k", p, anyWait).Wait)
}

func testKeysIndependent(t *testing.T, h Harness) {
	p := windowPolicy(1, time.Minute)
	near(t, h, 0, reserve(t, h, "k8s:a:one", p, anyWait).Wait)
	near(t, h, 0, reserve(t, h, "k8s:a:two", p, anyWait).Wait)
	_, err := h.Store.SetCooldown(ctx, "k8s:a:one", p, time.Minute)
	require.NoError(t, err)
	left, err := h.Store.Cooldown(ctx, "k8s:a:two")
	require.NoError(t, err)
	assert.Zero(t, left)
}

// testConcurrentWindow has 50 goroutines reserve on one budget at once and
// checks that no rolling window holds more than the limit.
func testConcurrentWindow(t *testing.T, h Harness) {
	const limit, workers, each = 20, 50, 10
	span := 10 * time.Second
	p := windowPolicy(limit, span)
	var mu sync.Mutex
	var slots []time.Duration
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				start := h.now()
				res, err := h.Store.Reserve(ctx, "k", p, anyWait)
				if !assert.NoError(t, err) || !assert.True(t, res.OK) {
					return
				}
				mu.Lock()
				slots = append(slots, start+res.Wait)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, slots, workers*each)
	slices.Sort(slots)
	first := slots[0]
	for i := range slots {
		slots[i] -= first
	}
	// Each slot is the send instant, from the first.
	for i := limit; i < len(slots); i++ {
		gap := slots[i] - slots[i-limit]
		assert.GreaterOrEqual(t, gap, span-2*h.Tolerance, fmt.Sprintf("sends %d and %d are %v apart", i-limit, i, gap))
	}
	assert.InDelta(t, float64(span*(workers*each/limit-1)), float64(slots[len(slots)-1]), float64(h.Tolerance)+1,
		"no slot is left idle: the last of %d requests waits %d windows", workers*each, workers*each/limit-1)
}
