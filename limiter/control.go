package limiter

import (
	"math"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// The adaptive concurrency limit is AIMD with slow start, with throttles
// as losses; its rules are listed in docs/limiting.md ("Adaptive
// concurrency"). As every throttle stops the whole budget for a
// Retry-After, growth past the seats that drew the last one waits for a
// probe to raise the ceiling, and probes that draw throttles grow rare.
const (
	cutFactor     = 0.75
	slowStartGain = 0.5
	quickProbe    = time.Second // APF's shortest Retry-After
	quickRounds   = 8
	minProbeEvery = 30 * time.Second
	maxProbeEvery = 10 * time.Minute
)

// control is the concurrency limit of a budget: fixed, or learned. It is
// guarded by its seats' mutex.
type control struct {
	adaptive    bool
	limit, max  float64   // seats, between 1 and max
	ssthresh    float64   // slow start below it
	ceiling     float64   // growth stops here until probeAt
	probeAt     time.Time // when the ceiling may rise
	probeEvery  time.Duration
	step        float64   // what the next rise adds
	raised      time.Time // the last rise; zero after a cut
	probeFailed bool      // a rise drew a throttle: no more quick probes
	quickTop    float64   // the seats the last throttle here implies: quick probes go no higher
	held        float64   // the ceiling that held for probeEvery (0: none)
	heldHit     time.Time // the last throttle at held, forgiven
	quickSeq    uint64    // the request whose answer may make a quick probe (0: none yet)
	quickFrom   time.Time // when the limit first held at the ceiling
	seq, cutSeq uint64    // requests seated so far; seq at the last cut
	servedPeak  int       // most seats in use of a request served since the last cut
	servedOwn   int       // most of this process's requests in flight of one served since then
	agreed      bool      // a cut was made or adopted: processes sharing the limit hold one
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
		adaptive: true, limit: min(InitialConcurrency, top), max: top, ssthresh: math.Inf(1),
		ceiling: top, probeAt: now, probeEvery: minProbeEvery, step: 1, quickTop: math.Inf(1),
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
// peers seats in use, own of them this process's, and returns the rise of
// the ceiling it made, if any.
func (c *control) good(seq uint64, peers, own int, now time.Time) (store.SeatCut, bool) {
	if !c.adaptive || seq <= c.cutSeq {
		return store.SeatCut{}, false
	}
	c.servedPeak, c.servedOwn = max(c.servedPeak, peers), max(c.servedOwn, own)
	if 2*peers <= c.seats() {
		return store.SeatCut{}, false // a limit not used more than half does not grow
	}
	if c.limit < c.ssthresh {
		// By half every round trip at most: no further than half again
		// the seats with which a request was served.
		c.limit = max(c.limit, min(c.limit+slowStartGain, float64(peers)*(1+slowStartGain)))
	} else {
		c.limit += 1 / math.Floor(c.limit)
	}
	if c.limit <= c.ceiling || c.ceiling >= c.max || now.Before(c.probeAt) || !c.probeDue(seq, now) {
		c.limit = min(c.limit, c.ceiling)
		return store.SeatCut{}, false
	}
	c.raise(now)
	c.limit = min(c.limit, c.ceiling)
	return store.SeatCut{Limit: c.seats(), Ceiling: int(c.ceiling), ProbeAfter: c.probeAt.Sub(now), Rise: true}, true
}

// probeDue reports whether the ceiling, which the limit has reached, may
// rise on the good answer to request seq: at once once a rise has drawn a
// throttle (probeAt then paces the probes), else once the limit has held
// at it for quickRounds round trips and for quickProbe.
func (c *control) probeDue(seq uint64, now time.Time) bool {
	if c.probeFailed {
		return true
	}
	if c.quickSeq == 0 {
		c.quickSeq = c.seq + uint64(quickRounds*math.Ceil(c.ceiling))
		c.quickFrom = now
		return false
	}
	return seq >= c.quickSeq && now.Sub(c.quickFrom) >= quickProbe
}

// raise lifts the ceiling by the step. After a rise that held, the next
// comes sooner and, once quick probes are over, goes twice as far.
func (c *control) raise(now time.Time) {
	if !c.raised.IsZero() {
		if c.probeFailed {
			c.step *= 2
		}
		c.probeEvery = max(c.probeEvery/2, minProbeEvery)
	}
	c.held, c.ceiling = c.ceiling, min(c.ceiling+c.step, c.max)
	c.raised, c.probeAt, c.quickSeq = now, now, 0
	if c.slowProbeNext() {
		c.probeAt = now.Add(c.probeEvery)
	}
}

// slowProbeNext reports whether the next probe waits probeEvery rather
// than coming quickly: once a probe has drawn a throttle, or once the
// ceiling is at the seats the last throttle allows (quick probes stop
// there, and the next rise that holds may be quick again).
func (c *control) slowProbeNext() bool {
	if c.probeFailed {
		return true
	}
	if c.ceiling >= c.quickTop {
		c.quickTop = math.Inf(1)
		return true
	}
	return false
}

// throttled cuts the limit after a throttling answer to request seq, sent
// with peers seats in use, running of them still unanswered (0: unknown),
// processes sharing the limit, and returns the cut it made, if any.
func (c *control) throttled(seq uint64, peers, running, processes int, now time.Time) (store.SeatCut, bool) {
	if !c.adaptive || seq <= c.cutSeq {
		return store.SeatCut{}, false
	}
	drew := !c.raised.IsZero() && now.Sub(c.raised) < c.probeEvery
	if drew { // probe less often
		c.probeEvery = min(2*c.probeEvery, maxProbeEvery)
		c.probeFailed = true
	} else if !c.raised.IsZero() {
		c.held = c.ceiling // the last rise held for probeEvery
	}
	c.forgive(drew, now)
	limit, ceiling := c.cutTo(peers, running)
	// The fewest seats a throttle after a served request allows: those the
	// request was served with, and those in use when it came but its own.
	// Quick probes look no further: a seat more would take the server
	// holding two requests past their answers.
	c.quickTop = math.Inf(1)
	if c.servedPeak > 0 {
		c.quickTop = float64(max(c.servedPeak, peers-1))
	}
	c.limit = max(limit, c.floor(processes), c.held)
	ceiling = max(ceiling, c.held)
	if !c.agreed && processes > 1 {
		// The processes' guesses of each other's requests in flight ran
		// high: no growth above the first cut before a probe.
		ceiling = min(ceiling, c.limit)
	}
	c.agreed = true
	c.ceiling = max(ceiling, c.limit)
	probeAfter := quickProbe
	if c.slowProbeNext() {
		probeAfter = c.probeEvery
	}
	c.resetAfterCut(now.Add(probeAfter))
	return store.SeatCut{Limit: int(c.limit), Ceiling: int(c.ceiling), ProbeAfter: probeAfter}, true
}

// cutTo returns the limit and the ceiling a throttle leaves (rules 3 and
// 4 of docs/limiting.md). The requests running count no fewer than this
// process's with which one was served since the last cut: the server
// frees a seat a moment after its answer arrives.
func (c *control) cutTo(peers, running int) (limit, ceiling float64) {
	limit = math.Floor(min(c.limit, float64(peers)) * cutFactor)
	ceiling = float64(peers - 1)
	if c.servedPeak > 0 {
		ceiling = min(ceiling, float64(c.servedPeak))
	}
	if running > 0 {
		r := float64(max(running, min(c.servedOwn, peers-1)))
		limit, ceiling = min(limit, r), min(ceiling, r)
	}
	return limit, ceiling
}

// forgive forgets the seats that held when a second throttle no rise drew
// comes at them within probeEvery: the server has fewer seats now. The
// first is forgiven, as the server's moment.
func (c *control) forgive(drew bool, now time.Time) {
	if drew || c.held == 0 || c.limit > c.held {
		return
	}
	if !c.heldHit.IsZero() && now.Sub(c.heldHit) < c.probeEvery {
		c.held, c.heldHit = 0, time.Time{}
		return
	}
	c.heldHit = now
}

// resetAfterCut starts the limit's life after a cut made or adopted: the
// next probe at probeAt, a seat further.
func (c *control) resetAfterCut(probeAt time.Time) {
	c.cutSeq = c.seq
	c.ssthresh = c.limit
	c.servedPeak, c.servedOwn = 0, 0
	c.step, c.raised, c.probeAt, c.quickSeq = 1, time.Time{}, probeAt, 0
}

// floor is the lowest limit a cut leaves: one seat per process sharing
// it, each holds one anyway, within the limit's ceiling.
func (c *control) floor(processes int) float64 {
	return min(float64(max(processes, 1)), c.max)
}

// adopt applies a cut or a rise another process sharing the budget made:
// the processes learn one limit together.
func (c *control) adopt(cut store.SeatCut, processes int, now time.Time) {
	if !c.adaptive {
		return
	}
	if cut.Rise {
		c.adoptRise(cut, now)
		return
	}
	if !c.raised.IsZero() && now.Sub(c.raised) >= c.probeEvery {
		c.held = c.ceiling // the last rise held
	}
	if float64(cut.Ceiling) < c.held {
		c.held = 0 // the other process was throttled twice at it
	}
	c.limit = max(min(c.limit, float64(cut.Limit)), c.floor(processes))
	ceiling := float64(cut.Ceiling)
	if c.agreed && c.raised.IsZero() {
		// Two processes throttled in one burst keep the lower ceiling.
		ceiling = min(ceiling, c.ceiling)
	}
	c.agreed, c.quickTop = true, math.Inf(1)
	c.ceiling = min(max(ceiling, c.limit), c.max)
	c.probeEvery = min(max(cut.ProbeAfter, minProbeEvery), maxProbeEvery)
	c.probeFailed = c.probeFailed || cut.ProbeAfter >= minProbeEvery // only quick probes come sooner
	c.resetAfterCut(now.Add(cut.ProbeAfter))
}

// adoptRise raises the ceiling to another process's rise, never lowering
// it. A rise arriving after a cut here was made before it: ignored.
func (c *control) adoptRise(rise store.SeatCut, now time.Time) {
	if c.raised.IsZero() && now.Before(c.probeAt) {
		return
	}
	c.agreed = true
	if float64(rise.Ceiling) > c.ceiling {
		c.held, c.ceiling = c.ceiling, min(float64(rise.Ceiling), c.max)
	}
	c.raised, c.probeAt, c.quickSeq = now, now.Add(rise.ProbeAfter), 0
	c.probeFailed = c.probeFailed || rise.ProbeAfter >= minProbeEvery
}
