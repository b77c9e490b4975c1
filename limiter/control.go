package limiter

import (
	"math"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// The adaptive concurrency limit follows TCP's congestion control, with
// the server's throttling answers as losses, and one difference that APF
// forces: every throttle stops the whole budget for Retry-After (at least
// a second, and APF raises it while a flow keeps being rejected), so
// probing above the last limit that drew one must be rare.
//
//   - Slow start: from InitialConcurrency, +½ for every good answer, and
//     by half every round trip at most, as TCP's limited slow start does
//     (doubling sent up to twice the server's seats before the first 429
//     came back, and every request over them drew one): the limit grows
//     past half again what it was when a round began only once a request
//     sent at that bound has been answered, so that the throttles of the
//     requests sent over the server's seats come back before it grows
//     further. Answers come back faster than throttles while the server
//     has seats to spare; counted as they came, they took the limit to
//     twice the server's seats and more. Until the first throttle.
//   - A throttle cuts the limit to cutFactor of the seats that were in use
//     when the throttled request was sent, or to the requests the server
//     was running when it refused it if fewer, but not below the most of
//     this process's requests in flight with which one was served since
//     the last cut — once per burst: answers to requests sent before the
//     cut do not cut again, nor grow the limit.
//   - Then additive growth (+1 per limit's worth of good answers), but
//     never above the ceiling: the seats that drew the throttle less one,
//     or fewer, the most seats in use with which a request was served
//     since the previous cut, or the requests the server was running when
//     it refused. In slow start the first throttle is drawn
//     with up to half as many seats again as the server has; those with
//     which requests were served are a closer bound, and every probe
//     above the server's seats costs the whole budget a Retry-After.
//   - The ceiling rises after probeEvery without a throttle (sooner
//     until a rise has drawn one, below), by a step that doubles with
//     every rise that held (quick probes go a seat at a time). A
//     throttle within probeEvery of a
//     rise doubles probeEvery (up to maxProbeEvery), resets the step and
//     leaves the limit no lower than the ceiling before the rise, which
//     held; a rise that held halves it (down to minProbeEvery). A rise of
//     more than one seat that drew a throttle tries halfway next, as a
//     rise from the ceiling that held.
//   - No cut leaves the limit or the ceiling below the seats that held
//     for probeEvery, however few requests the client saw in flight:
//     the server frees a seat a moment after its answer arrives, and
//     requests sent together reach it in any order. One throttle at
//     those seats is forgiven every probeEvery; a second within it lowers
//     them like any other (the server has fewer seats now).
//   - Processes sharing the limit through a store share every cut and
//     every rise of the ceiling, so that they grow together and their
//     shares add up to the limit probed.
//   - Until a rise draws a throttle, the ceiling rises as soon as the
//     limit has held at it for quickRounds round trips and quickProbe
//     (see probeDue) rather than after probeEvery. The cuts before it
//     rest on estimates that can lie below the server's seats: the
//     requests the server ran, as the client counts them, miss those
//     whose answers have arrived but whose seats the server has not yet
//     freed, or those of another client whose seats it frees a moment
//     later; processes sharing the limit first cut before they agree on
//     one, each knowing only its own requests in flight, then on
//     estimates of the others'. A ceiling left there would hold for
//     probeEvery; quick probes find the seats from above, for one more
//     Retry-After whenever they come, so they come as soon as the ceiling
//     has shown it holds and that the demand for more seats lasts. The
//     first cut of processes sharing the limit, before they agree, is its
//     own ceiling: their guesses of each other's requests in flight run
//     high.
//
// With a priority level of three seats that rejects, the limit settles on
// three after one throttle in slow start and one quick probe, a second
// after the first throttle's cooldown, and costs
// at most one more Retry-After every probeEvery, then every 2×, 4× … up to
// maxProbeEvery.
const (
	cutFactor     = 0.75
	slowStartGain = 0.5
	minProbeEvery = 30 * time.Second
	quickProbe    = time.Second
	quickRounds   = 8
	maxProbeEvery = 10 * time.Minute
)

// control is the concurrency limit of a budget: fixed, or learned. It is
// guarded by its seats' mutex.
type control struct {
	adaptive bool
	limit    float64 // seats, at least 1
	max      float64 // highest limit
	ssthresh float64 // slow start below it

	ceiling    float64   // growth stops here until raiseAt
	raiseAt    time.Time // when the ceiling may rise
	raised     time.Time // when it last rose; zero after a throttle
	step       float64   // how much the next rise adds
	probeEvery time.Duration

	seq    uint64 // requests sent so far
	cutSeq uint64 // seq at the last cut

	servedPeak int // most seats in use of a request served since the last cut
	servedOwn  int // most of this process's requests in flight of one served since the last cut

	// Slow start's round: the limit grows no further than roundCap until
	// the request seated roundEnd-th, the first once the limit reached it
	// (0: not reached), is answered.
	roundCap float64
	roundEnd uint64

	// agreed is set once a cut was made or adopted: the processes sharing
	// the limit then hold one limit, each its share of it.
	agreed bool
	// probeFailed is set once a rise drew a throttle (see probeAfter).
	probeFailed bool
	// probeSeq, until a rise draws a throttle, is the request whose good
	// answer lets the ceiling rise: the one seated quickRounds rounds of
	// the ceiling after the first good answer at it since the last cut or
	// rise (0: none yet), which came at probeFrom.
	probeSeq  uint64
	probeFrom time.Time
	// held is the ceiling that held for probeEvery (0: none yet): the
	// ceiling before the last rise, or the last rise's once it has held.
	// No cut leaves the limit or the ceiling below it, unless throttles
	// come at it twice within probeEvery (see forgive).
	held float64
	// heldThrottled is when a throttle last came at held (see forgive).
	heldThrottled time.Time
}

func newControl(c Concurrency, now time.Time) control {
	if c.Fixed > 0 {
		n := float64(c.Fixed)
		return control{limit: n, max: n, ceiling: n}
	}
	top := float64(c.Max)
	if c.Max <= 0 {
		top = DefaultMaxConcurrency
	}
	return control{
		adaptive:   true,
		limit:      min(InitialConcurrency, top),
		roundCap:   min(InitialConcurrency, top) * (1 + slowStartGain),
		max:        top,
		ssthresh:   math.Inf(1),
		ceiling:    top,
		raiseAt:    now,
		step:       1,
		probeEvery: minProbeEvery,
	}
}

// seats returns the limit as a whole number of seats.
func (c *control) seats() int { return int(c.limit) }

// seated counts a request given a seat and returns its sequence number.
func (c *control) seated() uint64 {
	c.seq++
	return c.seq
}

// good grows the limit after a good answer to request seq, sent with
// peers seats in use, own of them this process's, and reports the rise of
// the ceiling it made, if any. A limit that is not used more than half
// does not grow: it would only let a later burst overshoot.
func (c *control) good(seq uint64, peers, own int, now time.Time) (rise store.SeatCut, raised bool) {
	if !c.adaptive || seq <= c.cutSeq {
		return store.SeatCut{}, false
	}
	c.servedPeak = max(c.servedPeak, peers)
	c.servedOwn = max(c.servedOwn, own) // the server had as many seats then
	if 2*peers <= c.seats() {
		return store.SeatCut{}, false
	}
	if c.limit < c.ssthresh {
		c.slowStart(seq)
	} else {
		c.limit += 1 / math.Floor(c.limit)
	}
	if c.limit <= c.ceiling {
		return store.SeatCut{}, false
	}
	if c.ceiling < c.max && !now.Before(c.raiseAt) && c.probeDue(seq, now) {
		c.raise(now)
		raised = true
	}
	c.limit = min(c.limit, c.ceiling)
	if !raised {
		return store.SeatCut{}, false
	}
	return store.SeatCut{Limit: c.seats(), Ceiling: int(c.ceiling), ProbeAfter: c.raiseAt.Sub(now), Rise: true}, true
}

// slowStart grows the limit after a good answer to request seq, by half
// every round trip at most (see roundCap).
func (c *control) slowStart(seq uint64) {
	if c.roundEnd != 0 && seq >= c.roundEnd {
		// A request sent at the bound was served: a round trip has
		// passed, and the next may grow by half again.
		c.roundCap, c.roundEnd = c.limit*(1+slowStartGain), 0
	}
	c.limit = max(c.limit, min(c.limit+slowStartGain, c.roundCap))
	if c.limit >= c.roundCap && c.roundEnd == 0 {
		c.roundEnd = c.seq + 1
	}
}

// probeDue reports whether the ceiling, which the limit has reached, may
// rise on the good answer to request seq at now: once probeEvery has
// passed, or, until a rise has drawn a throttle, once the limit has held
// at the ceiling for quickRounds round trips and for quickProbe. A
// ceiling above the server's seats draws a throttle in the first round
// trip that uses it in full, so the rounds are evidence enough; but a
// probe past the seats costs the whole budget a Retry-After, and demand
// that has not kept the ceiling in use for as long (a burst that the
// rate budget ends) would not repay it.
func (c *control) probeDue(seq uint64, now time.Time) bool {
	if c.probeFailed {
		return true
	}
	if c.probeSeq == 0 {
		c.probeSeq = c.seq + uint64(quickRounds*math.Ceil(c.ceiling))
		c.probeFrom = now
		return false
	}
	return seq >= c.probeSeq && now.Sub(c.probeFrom) >= quickProbe
}

// raise lifts the ceiling by the step: a probe above the seats that last
// drew a throttle.
func (c *control) raise(now time.Time) {
	if !c.raised.IsZero() {
		// The previous rise held for probeEvery: probe faster, and
		// further once a probe has drawn a throttle. Quick probes go a
		// seat at a time: they correct a cut's estimate, which lies a
		// seat or two below the server's seats, and a step past them
		// costs a Retry-After more to find its way back (see throttled).
		if c.probeFailed {
			c.step *= 2
		}
		c.probeEvery = max(c.probeEvery/2, minProbeEvery)
	}
	c.held = c.ceiling
	c.ceiling = min(c.ceiling+c.step, c.max)
	c.raised = now
	c.raiseAt = now // until a rise draws a throttle, probeDue decides when
	if c.probeFailed {
		c.raiseAt = now.Add(c.probeEvery)
	}
	c.probeSeq = 0
}

// throttled cuts the limit after a throttling answer to request seq, sent
// with peers seats in use, and reports the cut it made, if any. running is
// how many of the budget's requests the server was running when it
// refused this one, as far as the client can tell (the requests sent
// before it and still unanswered when its answer came), 0 when unknown:
// the closest bound on the server's seats, the limit is cut to it, and
// not grown past it, when it is lower. processes share the limit (1 when
// it is this process's alone).
func (c *control) throttled(seq uint64, peers, running, processes int, now time.Time) (store.SeatCut, bool) {
	if !c.adaptive || seq <= c.cutSeq {
		return store.SeatCut{}, false
	}
	c.cutSeq = c.seq
	first := !c.agreed
	c.agreed = true
	drew := !c.raised.IsZero() && now.Sub(c.raised) < c.probeEvery
	if drew {
		// The last rise drew it: probe less often.
		c.probeEvery = min(2*c.probeEvery, maxProbeEvery)
		c.probeFailed = true
	} else if !c.raised.IsZero() {
		// The last rise held for probeEvery.
		c.held = c.ceiling
	}
	probed := c.ceiling
	c.forgive(now, drew)
	c.limit = math.Floor(min(c.limit, float64(peers)) * cutFactor)
	ceiling := peers - 1
	if c.servedPeak > 0 {
		ceiling = min(ceiling, c.servedPeak)
	}
	if running > 0 {
		// As the client counts them, but no fewer than the requests of
		// this process's with which one was served since the last cut
		// (fewer than this one's): the server runs a request a moment
		// after its answer has arrived, and the seats it then holds are
		// not counted.
		running = max(running, min(c.servedOwn, peers-1))
		c.limit = min(c.limit, float64(running))
		ceiling = min(ceiling, running)
	}
	c.limit = max(c.limit, c.floor(processes))
	if first && processes > 1 {
		// Before the processes agree on a limit, the others' requests in
		// flight are guessed high (see seat.send), and a ceiling above
		// the cut lets them all grow past the server's seats when the
		// cooldown ends. The quick probe finds a seat more, if any.
		ceiling = min(ceiling, int(c.limit))
	}
	// Back to the ceiling that held, however few the requests in flight
	// looked: the server frees a seat a moment after its answer arrives,
	// and requests sent together may reach it in another order, so that
	// a throttle can come with fewer in flight than the seats that held.
	c.limit = max(c.limit, c.held)
	ceiling = max(ceiling, int(c.held))
	// A rise of more than a seat that drew it tries halfway next, as a
	// rise from the ceiling that held: the seats between may hold.
	bisect := drew && c.held > 0 && probed-c.held >= 2
	if bisect {
		ceiling = int(c.held + math.Floor((probed-c.held)/2))
	}
	c.ssthresh = c.limit
	c.servedPeak, c.servedOwn = 0, 0
	c.ceiling = max(float64(ceiling), c.limit)
	c.step = 1
	c.raised = time.Time{}
	if bisect {
		c.raised = now
	}
	c.raiseAt = now.Add(c.probeAfter())
	c.probeSeq = 0
	return store.SeatCut{Limit: int(c.limit), Ceiling: int(c.ceiling), ProbeAfter: c.raiseAt.Sub(now)}, true
}

// forgive decides whether a throttle that no rise drew, with the limit
// no higher than the ceiling that held, may lower that ceiling. The first
// within probeEvery may not: a throttle at seats that held for
// probeEvery is as likely the server's moment as a loss of seats, and a
// seat fewer would cost a share of everything served until the next
// probe, where the throttle costs one Retry-After. A second within
// probeEvery may: the server has fewer seats now, and the limit is cut
// like any other.
func (c *control) forgive(now time.Time, drew bool) {
	if drew || c.held == 0 || c.limit > c.held {
		return
	}
	if !c.heldThrottled.IsZero() && now.Sub(c.heldThrottled) < c.probeEvery {
		c.held, c.heldThrottled = 0, time.Time{}
		return
	}
	c.heldThrottled = now
}

// probeAfter returns how long after a cut the ceiling may rise next:
// probeEvery, or, until a rise has drawn a throttle, quickProbe, APF's
// shortest Retry-After. Nothing is sent during the cut's cooldown, so no
// rise can come sooner (see probeDue); a rise another process shares
// within it was made before the cut (see adoptRise).
func (c *control) probeAfter() time.Duration {
	if !c.probeFailed {
		return min(quickProbe, c.probeEvery)
	}
	return c.probeEvery
}

// floor is the lowest limit a cut leaves: one seat per process sharing
// it, within the ceiling of the limit. Each process holds at least one
// seat, so a limit below their number holds back nothing more, and would
// only have to grow back through seats that change nothing.
func (c *control) floor(processes int) float64 {
	return min(float64(max(processes, 1)), c.max)
}

// adopt applies a cut another process sharing the budget made: the
// processes learn one limit together.
func (c *control) adopt(cut store.SeatCut, processes int, now time.Time) {
	if !c.adaptive {
		return
	}
	if cut.Rise {
		c.adoptRise(cut, now)
		return
	}
	c.cutSeq = c.seq
	c.servedPeak, c.servedOwn = 0, 0
	if !c.raised.IsZero() && now.Sub(c.raised) >= c.probeEvery {
		c.held = c.ceiling // the last rise held
	}
	if float64(cut.Ceiling) < c.held {
		// The other process saw throttles come twice at the ceiling
		// that held (see forgive).
		c.held = 0
	}
	c.limit = max(min(c.limit, float64(cut.Limit)), c.floor(processes))
	c.ssthresh = c.limit
	ceiling := float64(cut.Ceiling)
	if c.agreed && c.raised.IsZero() {
		// Every cut since the last rise bounds the seats: two processes
		// throttled in one burst keep the lower of their ceilings.
		ceiling = min(ceiling, c.ceiling)
	}
	c.agreed = true
	c.ceiling = min(max(ceiling, c.limit), c.max)
	c.step = 1
	c.raised = time.Time{}
	c.probeEvery = min(max(cut.ProbeAfter, minProbeEvery), maxProbeEvery)
	c.raiseAt = now.Add(cut.ProbeAfter)
	c.probeSeq = 0
	c.adoptProbeFailed(cut)
}

// adoptProbeFailed learns from another process's cut or rise whether a
// rise has drawn a throttle: its next probe is then probeEvery after it,
// never sooner (quick probes come after quickProbe at most).
func (c *control) adoptProbeFailed(cut store.SeatCut) {
	if cut.ProbeAfter >= minProbeEvery {
		c.probeFailed = true
	}
}

// adoptRise applies a rise of the ceiling another process sharing the
// budget made: the limit grows to it here too.
func (c *control) adoptRise(rise store.SeatCut, now time.Time) {
	if c.raised.IsZero() && now.Before(c.raiseAt) {
		// A cut came here since: the rise was made before it (the
		// processes probe on one schedule, which the cut set anew).
		return
	}
	c.agreed = true
	if float64(rise.Ceiling) > c.ceiling {
		c.held = c.ceiling
		c.ceiling = min(float64(rise.Ceiling), c.max)
	}
	c.raised = now
	c.raiseAt = now.Add(rise.ProbeAfter)
	c.probeSeq = 0
	c.adoptProbeFailed(rise)
}
