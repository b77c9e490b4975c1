package limiter

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestControlSlowStartGrowsByHalfPerRoundTrip(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	require.Equal(t, InitialConcurrency, c.seats())
	for round := 0; round < 3; round++ {
		n := c.seats()
		seqs := make([]uint64, n)
		for i := range seqs {
			seqs[i] = c.seated()
		}
		for _, s := range seqs {
			c.good(s, n, n, t0)
		}
		assert.Equal(t, n+n/2, c.seats(), "round %d", round)
	}
}

func TestControlCutsOncePerBurst(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 8
	seqs := make([]uint64, 8)
	for i := range seqs {
		seqs[i] = c.seated()
	}
	for _, s := range seqs[3:] {
		c.throttled(s, 8, 0, 1, t0)
	}
	assert.Equal(t, 6, c.seats(), "five throttles of one burst cut once, to 3/4")
	for _, s := range seqs[:3] {
		c.good(s, 8, 8, t0)
	}
	assert.Equal(t, 6, c.seats(), "answers to requests sent before the cut do not grow the limit")

	s := c.seated()
	c.throttled(s, 6, 0, 1, t0)
	assert.Equal(t, 4, c.seats(), "a throttle of a request sent after the cut cuts again")
}

func TestControlCutsToTheSeatsInUse(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 40
	c.throttled(c.seated(), 4, 0, 1, t0)
	assert.Equal(t, 3, c.seats(), "the cut starts from the seats the throttled request saw, not an unused limit")
	c.throttled(c.seated(), 1, 0, 1, t0)
	assert.Equal(t, 1, c.seats(), "never below one")
}

func TestControlStaysBelowTheLastThrottleUntilItProbes(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 4
	c.throttled(c.seated(), 4, 0, 1, t0)
	require.Equal(t, 3, c.seats())

	grow := func(from, to time.Time) time.Time {
		for now := from; now.Before(to); now = now.Add(10 * time.Millisecond) {
			c.good(c.seated(), c.seats(), c.seats(), now)
		}
		return to
	}
	grow(t0, t0.Add(quickProbe))
	assert.Equal(t, 3, c.seats(), "no growth to the seats that drew the throttle before quickProbe")
	now := t0.Add(quickProbe)
	answerWell(&c, now, quickRounds*3+3)
	assert.Equal(t, 3, c.seats(), "nor before the limit has held at the ceiling for quickProbe, however many round trips")
	now = now.Add(quickProbe)
	answerWell(&c, now, 3) // the ceiling rises, and the limit grows to it
	assert.Equal(t, 4, c.seats(), "then one more seat is tried")

	now = now.Add(time.Second)
	c.throttled(c.seated(), 4, 3, 1, now)
	assert.Equal(t, 3, c.seats())
	assert.Equal(t, 2*minProbeEvery, c.probeEvery, "a probe that drew a throttle doubles the time to the next")
	grow(now, now.Add(2*minProbeEvery-time.Second))
	assert.Equal(t, 3, c.seats(), "and from then on no growth before probeEvery")
	grow(now.Add(2*minProbeEvery), now.Add(2*minProbeEvery+time.Second))
	assert.Equal(t, 4, c.seats(), "after probeEvery, one more seat is tried")
}

// The server frees a seat a moment after its answer arrives: a probe's
// throttle can come back with fewer requests in flight than the seats
// that held before it. The limit goes back to them, not below.
func TestControlProbeThatDrewAThrottleGoesBackToTheCeilingThatHeld(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 4
	c.throttled(c.seated(), 4, 3, 1, t0)
	require.Equal(t, 3, c.seats())

	now := probeQuickly(&c, t0.Add(minProbeEvery))
	require.Equal(t, 4, c.seats(), "the probe")
	c.throttled(c.seated(), 4, 2, 1, now.Add(time.Second))
	assert.Equal(t, 3, c.seats(), "2 seemed running, but 3 held for probeEvery")
	assert.Equal(t, 3, int(c.ceiling))

	c.throttled(c.seated(), 3, 2, 1, now.Add(2*time.Second))
	assert.Equal(t, 3, c.seats(), "one throttle at the seats that held leaves them")
	assert.Equal(t, 3, int(c.ceiling))

	c.throttled(c.seated(), 3, 2, 1, now.Add(3*time.Second))
	assert.Equal(t, 2, c.seats(), "a second within probeEvery cuts to the requests running")
	assert.Equal(t, 2, int(c.ceiling))
}

// A throttle at the seats that held, a probeEvery after the last, leaves
// them again: only throttles that come closer together lower them.
func TestControlForgivesAThrottleAtTheSeatsThatHeldOncePerProbeEvery(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 4
	c.throttled(c.seated(), 4, 3, 1, t0)
	now := probeQuickly(&c, t0.Add(quickProbe))
	require.Equal(t, 4, c.seats(), "the probe")
	now = now.Add(c.probeEvery)
	c.throttled(c.seated(), 4, 3, 1, now)
	require.Equal(t, 4, c.seats(), "4 held for probeEvery: a throttle at it is forgiven")
	for _, d := range []time.Duration{c.probeEvery, 2 * c.probeEvery} {
		c.throttled(c.seated(), 4, 2, 1, now.Add(d))
		assert.Equal(t, 4, c.seats(), "a probeEvery after the last: forgiven again")
		now = now.Add(d)
	}
	c.throttled(c.seated(), 4, 2, 1, now.Add(time.Second))
	assert.Equal(t, 2, c.seats(), "a second within probeEvery: cut to the requests running")
}

// A rise that held lets the next go twice as far; one that draws a
// throttle goes back to the seats that held, with the ceiling a seat below
// those that drew it (requests were served with them in flight).
func TestControlRisesFurtherAfterARiseThatHeld(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 3
	c.throttled(c.seated(), 3, 0, 1, t0)
	require.Equal(t, 2, int(c.ceiling))
	rise := func(at time.Time) { answerWell(&c, at, 20) }
	now := probeQuickly(&c, t0.Add(quickProbe))
	require.Equal(t, 3, c.seats(), "the quick probe")
	now = now.Add(time.Second)
	c.throttled(c.seated(), 3, 2, 1, now)
	require.Equal(t, 2, c.seats(), "drew a throttle")

	now = now.Add(c.probeEvery)
	rise(now)
	require.Equal(t, 3, c.seats(), "a probe, by one seat")
	now = now.Add(c.probeEvery)
	rise(now)
	require.Equal(t, 5, c.seats(), "it held: the next by two")

	now = now.Add(time.Second)
	c.throttled(c.seated(), 5, 3, 1, now)
	assert.Equal(t, 3, c.seats(), "back to the 3 that held")
	assert.Equal(t, 4, int(c.ceiling), "and 4, one below the 5 that drew it, is tried next")
	rise(now.Add(2 * time.Second))
	require.Equal(t, 4, c.seats())
	c.throttled(c.seated(), 4, 3, 1, now.Add(3*time.Second))
	assert.Equal(t, 3, c.seats(), "4 drew one too: back to 3")
	assert.Equal(t, 3, int(c.ceiling))
}

// Quick probes correct a cut's estimate a seat at a time: a step past
// the server's seats would cost a Retry-After more to find the way back.
func TestControlQuickProbesGoASeatAtATime(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 2
	c.throttled(c.seated(), 2, 0, 1, t0)
	require.Equal(t, 1, int(c.ceiling))
	now := t0.Add(quickProbe)
	for i := 1; i <= 3; i++ {
		now = probeQuickly(&c, now)
		assert.Equal(t, 1+i, c.seats(), "quick probe %d", i)
	}
}

// A throttle that came with no more requests in flight than one was
// served with says the server held one of them past its answer: quick
// probes find the seats the request was served with, and look no
// further until the probe interval.
func TestControlQuickProbesStopAtTheSeatsAThrottleAllows(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 3
	for range 10 {
		c.good(c.seated(), 3, 3, t0) // served with 3 in flight
	}
	c.throttled(c.seated(), 3, 0, 1, t0)
	require.Equal(t, 2, c.seats(), "the cut")
	now := probeQuickly(&c, t0.Add(quickProbe))
	assert.Equal(t, 3, c.seats(), "a quick probe finds the seats a request was served with")
	probeQuickly(&c, now)
	answerWell(&c, now.Add(minProbeEvery-time.Second), 100)
	assert.Equal(t, 3, c.seats(), "no quick probe past them")
	probeQuickly(&c, now.Add(minProbeEvery))
	assert.Equal(t, 4, c.seats(), "a probe after the probe interval")
}

// probeQuickly gives c good answers, to requests sent with the limit in
// use, until a quick probe is due and made: quickRounds rounds of the
// ceiling at from, then, quickProbe later, enough for the ceiling to
// rise and the limit to grow to it. It returns when the probe was made.
func probeQuickly(c *control, from time.Time) time.Time {
	ceiling := int(c.ceiling)
	answerWell(c, from, (quickRounds+1)*ceiling+1)
	at := from.Add(quickProbe)
	answerWell(c, at, ceiling+2)
	return at
}

// answerWell gives c n good answers at now, to requests sent with the
// limit in use.
func answerWell(c *control, now time.Time, n int) {
	for range n {
		c.good(c.seated(), c.seats(), c.seats(), now)
	}
}

func TestControlCeilingIsTheMostSeatsServedSinceTheLastCut(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 6
	for peers := 1; peers <= 3; peers++ {
		c.good(c.seated(), peers, peers, t0)
	}
	c.throttled(c.seated(), 5, 0, 1, t0)
	assert.Equal(t, 3, int(c.ceiling), "requests were served with 3 seats in use, one was throttled with 5")

	for range 100 {
		c.good(c.seated(), 3, 3, t0.Add(quickProbe/2))
	}
	assert.Equal(t, 3, c.seats(), "no growth to the 4 seats nothing was served with before the probe")

	c.throttled(c.seated(), 3, 0, 1, t0.Add(2*time.Second))
	assert.Equal(t, 2, int(c.ceiling), "a throttle with 3 seats in use bounds it below them, whatever was served with them")
}

// The requests the server was running when it refused one, as the client
// counts them, miss those whose answers have arrived but whose seats the
// server has not yet freed: a cut goes no lower than the most of this
// process's requests in flight with which one was served since the last
// cut.
func TestControlCutsNoLowerThanTheRequestsOneWasServedWith(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 4
	early, late := c.seated(), c.seated()
	c.good(early, 3, 3, t0)
	c.throttled(c.seated(), 4, 1, 1, t0) // one of the three seen running
	assert.Equal(t, 3, c.seats(), "one was served with 3 in flight: the server had 3 seats")
	assert.Equal(t, 3.0, c.ceiling)

	c.good(late, 3, 3, t0) // answered after the cut, sent before it
	c.throttled(c.seated(), 3, 1, 1, t0)
	assert.Equal(t, 1, c.seats(), "served before the last cut: no bound")
}

func TestControlCutsToTheRequestsTheServerWasRunning(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 10
	c.throttled(c.seated(), 10, 3, 1, t0)
	assert.Equal(t, 3, c.seats(), "the server refused it while it ran 3 of ours, fewer than 10 × 3/4")
	assert.Equal(t, 3, int(c.ceiling), "nor does it grow past them")

	c.throttled(c.seated(), 3, 5, 1, t0)
	assert.Equal(t, 2, c.seats(), "more running than seats in use bounds nothing")
}

func TestControlUnusedLimitDoesNotGrow(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	for range 100 {
		c.good(c.seated(), 1, 1, t0)
	}
	assert.Equal(t, 2, c.seats(), "one request at a time: the limit stays within twice the use")
}

func TestControlKeepsBetweenOneAndMax(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true, Max: 5}, t0)
	for range 100 {
		c.good(c.seated(), 5, 5, t0)
	}
	assert.Equal(t, 5, c.seats())
	for range 10 {
		c.throttled(c.seated(), 1, 0, 1, t0)
	}
	assert.Equal(t, 1, c.seats())
}

func TestControlSharedByProcessesCutsNoLowerThanOneSeatEach(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 3
	c.throttled(c.seated(), 3, 0, 2, t0)
	assert.Equal(t, 2, c.seats(), "3 × 0.75")
	c.throttled(c.seated(), 2, 0, 2, t0)
	assert.Equal(t, 2, c.seats(), "each of the two processes holds a seat whatever the limit")
	c.adopt(store.SeatCut{Limit: 1, Ceiling: 1, ProbeAfter: minProbeEvery}, 2, t0)
	assert.Equal(t, 2, c.seats(), "nor does another process's cut take it lower")

	small := newControl(Concurrency{Adaptive: true, Max: 2}, t0)
	small.throttled(small.seated(), 2, 0, 5, t0)
	assert.Equal(t, 2, small.seats(), "never above the ceiling of the limit")
}

// Until a rise draws a throttle, the ceiling rises quickProbe after a cut
// or a rise: the ceilings cuts leave rest on estimates that can lie below
// the server's seats.
func TestControlProbesSoonUntilARiseDrawsAThrottle(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 4
	cut, ok := c.throttled(c.seated(), 4, 2, 2, t0)
	require.True(t, ok)
	assert.Equal(t, store.SeatCut{Limit: 2, Ceiling: 2, ProbeAfter: quickProbe}, cut, "other processes learn when to probe")

	now := t0.Add(quickProbe)
	rise, _ := c.good(c.seated(), 2, 2, now) // the limit holds at the ceiling from now
	require.False(t, rise.Rise)
	now = now.Add(quickProbe)
	answers := 0
	for ; answers < 100 && !rise.Rise; answers++ {
		rise, _ = c.good(c.seated(), 2, 2, now)
	}
	require.True(t, rise.Rise, "the ceiling rises once the limit has held at it for quickProbe")
	assert.Equal(t, quickRounds*2, answers, "and for quickRounds round trips")
	assert.Equal(t, 3, rise.Ceiling)
	assert.Zero(t, rise.ProbeAfter, "the rise held nothing yet: the next comes as soon as the rounds have passed")

	cut, _ = c.throttled(c.seated(), 3, 2, 2, now.Add(time.Second))
	assert.Equal(t, 2*minProbeEvery, cut.ProbeAfter, "a rise that drew a throttle: probeEvery, doubled, from now on")
}

// Before processes sharing a limit agree on it, each guesses the others'
// requests in flight high: the first cut leaves no room to grow above it
// until the quick probe.
func TestControlFirstSharedCutLeavesNoRoomAboveIt(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 5
	cut, ok := c.throttled(c.seated(), 6, 0, 2, t0)
	require.True(t, ok)
	assert.Equal(t, store.SeatCut{Limit: 3, Ceiling: 3, ProbeAfter: quickProbe}, cut, "not 5, one below the 6 guessed in flight")
	answerWell(&c, t0.Add(quickProbe/2), 20)
	assert.Equal(t, 3, c.seats())
	probeQuickly(&c, t0.Add(quickProbe))
	assert.Equal(t, 4, c.seats(), "the quick probe")

	alone := newControl(Concurrency{Adaptive: true}, t0)
	alone.limit = 5
	cut, _ = alone.throttled(alone.seated(), 5, 0, 1, t0)
	assert.Equal(t, 4, cut.Ceiling, "a process alone counts what it has in flight: one below")
}

// Processes sharing a limit rise together: one's rise lifts the others'
// ceilings, never lowers them, and their limits grow to it.
func TestControlAdoptsAnotherProcesssRise(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.adopt(store.SeatCut{Limit: 2, Ceiling: 2, ProbeAfter: quickProbe}, 2, t0)
	require.Equal(t, 2, int(c.ceiling))
	c.adopt(store.SeatCut{Limit: 3, Ceiling: 3, ProbeAfter: minProbeEvery, Rise: true}, 2, t0.Add(quickProbe/2))
	require.Equal(t, 2, int(c.ceiling), "a rise made before the cut, arriving after it, is ignored until the probe is due")

	c.adopt(store.SeatCut{Limit: 3, Ceiling: 3, ProbeAfter: minProbeEvery, Rise: true}, 2, t0.Add(quickProbe))
	assert.Equal(t, 3, int(c.ceiling))
	for range 10 {
		c.good(c.seated(), 2, 2, t0.Add(quickProbe+time.Second))
	}
	assert.Equal(t, 3, c.seats(), "the limit grows to the ceiling the other raised, and no further before it probes")

	c.adopt(store.SeatCut{Limit: 2, Ceiling: 2, ProbeAfter: minProbeEvery, Rise: true}, 2, t0.Add(quickProbe+2*time.Second))
	assert.Equal(t, 3, int(c.ceiling), "a rise never lowers the ceiling")

	c.throttled(c.seated(), 3, 0, 2, t0.Add(quickProbe+3*time.Second))
	require.Equal(t, 2, int(c.ceiling), "the rise drew a throttle")
	c.adopt(store.SeatCut{Limit: 3, Ceiling: 3, ProbeAfter: minProbeEvery, Rise: true}, 2, t0.Add(quickProbe+3*time.Second))
	assert.Equal(t, 2, int(c.ceiling), "another process's rise to it, made before the cut, arrives late: ignored")
}

// A process that adopts a cut made when a probe drew a throttle probes
// every probeEvery from then on, as the process that made it does, not
// again and again a few round trips apart.
func TestControlAdoptsThatAProbeDrewAThrottle(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.adopt(store.SeatCut{Limit: 3, Ceiling: 3, ProbeAfter: 2 * minProbeEvery}, 2, t0)
	now := t0.Add(2 * minProbeEvery)
	answerWell(&c, now, 10)
	require.Equal(t, 4, c.seats(), "the probe, when the cut said")
	answerWell(&c, now.Add(time.Second), 100)
	assert.Equal(t, 4, c.seats(), "the next waits for probeEvery")
}

// Two processes throttled in one burst keep the lower of their ceilings.
func TestControlKeepsTheLowerCeilingOfCutsSinceTheLastRise(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit, c.agreed = 6, true // the processes agreed on a limit before
	c.throttled(c.seated(), 5, 0, 2, t0)
	require.Equal(t, 4, int(c.ceiling))
	c.adopt(store.SeatCut{Limit: 3, Ceiling: 6, ProbeAfter: quickProbe}, 2, t0)
	assert.Equal(t, 4, int(c.ceiling), "the other's higher ceiling does not lift this one's")
	c.adopt(store.SeatCut{Limit: 3, Ceiling: 3, ProbeAfter: quickProbe}, 2, t0)
	assert.Equal(t, 3, int(c.ceiling), "a lower one holds")
}

func TestControlFixedNeverMoves(t *testing.T) {
	c := newControl(Concurrency{Fixed: 3, Adaptive: true}, t0)
	c.throttled(c.seated(), 3, 0, 1, t0)
	c.good(c.seated(), 3, 3, t0)
	assert.Equal(t, 3, c.seats())
}

// TestControlAgainstARejectingLevel runs the control against a simulated
// priority level of three seats that rejects the fourth request in flight
// with Retry-After 1s (as APF's Reject does), 40 workers, 2 ms per
// request, for 15 minutes of simulated time: the limit settles on the
// level's seats, throttles stay rare and most of the capacity is served.
func TestControlAgainstARejectingLevel(t *testing.T) {
	const run = 15 * time.Minute
	c := newControl(Concurrency{Adaptive: true}, t0)
	served, rejected := simulateLevel(&c, run, func(time.Duration) int { return 3 })
	best := int(run / simService * 3)
	t.Logf("served %d of %d (%.1f%%), %d throttles, limit %d", served, best, 100*float64(served)/float64(best), rejected, c.seats())
	assert.Equal(t, 3, c.seats(), "the limit settles on the level's seats")
	assert.GreaterOrEqual(t, float64(served), 0.95*float64(best), "at least 95%% of the level's capacity is served")
	assert.LessOrEqual(t, rejected, 10, "a throttle in slow start, then a probe every 30s, 1m, 2m, 4m, 8m")
}

// The cost of learning the level, in the first seconds: one throttle in
// slow start, a second of cooldown for the whole budget, and nothing else
// lost. The cut lands on the seats (a request was served with 3 in
// flight, the throttle came with 4), so no quick probe follows to draw a
// second throttle.
func TestControlLearnsARejectingLevelForOneCooldown(t *testing.T) {
	for _, run := range []time.Duration{15 * time.Second, 30 * time.Second} {
		c := newControl(Concurrency{Adaptive: true}, t0)
		served, rejected := simulateLevel(&c, run, func(time.Duration) int { return 3 })
		best := int(run / simService * 3)
		t.Logf("%v: served %d of %d (%.1f%%), %d throttles, limit %d", run, served, best, 100*float64(served)/float64(best), rejected, c.seats())
		assert.Equal(t, 1, rejected, "%v: a throttle in slow start, and no quick probe after a cut on the seats", run)
		lost := time.Second / simService * 3 // a cooldown of a second at 3 seats
		assert.GreaterOrEqual(t, served, best-int(lost)-int(10*time.Millisecond/simService*3), "%v: no more lost than the cooldown, within 10ms at 3 seats", run)
	}
}

// A cut can land below the level's seats: the requests the server ran,
// as the client counts them, miss those whose answers have arrived but
// whose seats the server has not yet freed. Quick probes find the seats
// a seat at a time, once the cut's cooldown is over (here, the
// simulation starts after it) and the limit has held each ceiling for
// quickProbe: one throttle more, at the seat past them, and nothing else
// lost but the seats idle meanwhile.
func TestControlQuickProbesFindTheSeatsFromALowCut(t *testing.T) {
	const run = 15 * time.Second
	c := newControl(Concurrency{Adaptive: true}, t0)
	c.limit = 4
	c.throttled(c.seated(), 4, 1, 1, t0) // one of the three seen running
	require.Equal(t, 1, c.seats())
	served, rejected := simulateLevel(&c, run, func(time.Duration) int { return 3 })
	best := int(run / simService * 3)
	t.Logf("served %d of %d (%.1f%%), %d throttles, limit %d", served, best, 100*float64(served)/float64(best), rejected, c.seats())
	assert.Equal(t, 3, c.seats(), "the limit settles on the level's seats")
	assert.Equal(t, 1, rejected, "one throttle, at the fourth seat")
	// Two seats idle until the first probe (the cut's quickProbe, then
	// the hold's), one until the second, and a cooldown of a second at 3.
	idle := (4*quickProbe + quickProbe + 3*time.Second) / simService
	assert.GreaterOrEqual(t, served, best-int(idle)-int(50*time.Millisecond/simService*3), "no more lost than that, within 50ms at 3 seats")
}

// A level whose seats fall (another client takes one) draws throttles at
// the seats that held: the second within the probe interval lowers them,
// and the limit follows the level down.
func TestControlFollowsALevelWhoseSeatsFall(t *testing.T) {
	const run = 10 * time.Minute
	c := newControl(Concurrency{Adaptive: true}, t0)
	seats := func(d time.Duration) int {
		if d < run/2 {
			return 3
		}
		return 2
	}
	served, rejected := simulateLevel(&c, run, seats)
	best := int(run / 2 / simService * 5)
	t.Logf("served %d of %d (%.1f%%), %d throttles, limit %d", served, best, 100*float64(served)/float64(best), rejected, c.seats())
	assert.Equal(t, 2, c.seats(), "the limit follows the level's seats down")
	assert.GreaterOrEqual(t, float64(served), 0.95*float64(best), "at least 95%% of the level's capacity is served")
	assert.LessOrEqual(t, rejected, 12, "a few more than with seats that hold: two at the fall, then the probes")
}

// simService is how long the simulated level takes to serve a request.
const simService = 2 * time.Millisecond

// simulateLevel runs c against a simulated priority level that rejects
// the request in flight past seats(time into the run) with Retry-After
// 1s (as APF's Reject does), 40 workers, simService per request, for run
// of simulated time, and returns the requests served and rejected.
func simulateLevel(c *control, run time.Duration, seats func(time.Duration) int) (served, rejected int) {
	const retryAfter = time.Second
	type req struct {
		seq   uint64
		peers int
		end   time.Time
		ok    bool
	}
	var (
		now      = t0
		inFlight []req
		coolTill time.Time
	)
	for now.Before(t0.Add(run)) {
		// Finish what is due.
		before := slices.Clone(inFlight)
		kept := inFlight[:0]
		for _, r := range before {
			if r.end.After(now) {
				kept = append(kept, r)
				continue
			}
			if r.ok {
				served++
				c.good(r.seq, r.peers, r.peers, now)
			} else {
				rejected++
				running := 0 // the requests sent before it, still unanswered
				for _, x := range before {
					if x.seq < r.seq && x.end.After(now) {
						running++
					}
				}
				c.throttled(r.seq, r.peers, running, 1, now)
				coolTill = now.Add(retryAfter)
			}
		}
		inFlight = kept
		// Send while seats are free and no cooldown holds the budget.
		for !now.Before(coolTill) && len(inFlight) < c.seats() {
			accepted := 0
			for _, r := range inFlight {
				if r.ok {
					accepted++
				}
			}
			r := req{seq: c.seated(), peers: len(inFlight) + 1, ok: accepted < seats(now.Sub(t0))}
			r.end = now.Add(simService)
			if !r.ok {
				r.end = now // rejected at once
			}
			inFlight = append(inFlight, r)
		}
		now = now.Add(time.Millisecond)
	}
	return served, rejected
}

// In slow start, the limit grows by half every round trip at most:
// answers to requests seated before it reached that bound, however many,
// lift it no further; the answer to one seated since starts the next
// round.
func TestControlSlowStartWaitsARoundTripAtItsBound(t *testing.T) {
	c := newControl(Concurrency{Adaptive: true}, t0)
	early := make([]uint64, 20)
	for i := range early {
		early[i] = c.seated()
	}
	for _, s := range early {
		c.good(s, 2, 2, t0)
	}
	assert.Equal(t, 3, c.seats(), "half again the 2 it started with")
	c.good(c.seated(), 3, 3, t0)
	c.good(c.seated(), 3, 3, t0)
	assert.Equal(t, 4, c.seats(), "requests sent at the bound, answered: on by half a seat each")
}
