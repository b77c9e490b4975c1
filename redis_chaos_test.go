package k8sratelimit_test

// The chaos tests: OS processes (this test binary in chaos-child mode,
// redis_chaos_child_test.go) share one budget through a real redis-server
// under steady load while the server is killed and restarted, then frozen
// (SIGSTOP) and thawed (SIGCONT), once for each failure policy. They check
// the promises of the README's "Sharing a budget across replicas and
// workers (Redis)": no call hangs ("When Redis fails"), the windows hold
// what "Exact across an outage" states, sharing resumes once Redis is
// back, and nothing is left running once a process closes its limiter.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/childproc"
	"github.com/k8sratelimit/k8sratelimit/internal/decided"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// The budget of the chaos tests: chaosLimit requests a second.
const (
	chaosLimit    = 20
	chaosTimespan = time.Second
)

// chaosChild is one chaos child process and, once it ended, its report.
type chaosChild struct {
	*childproc.Process

	requests  []chaosRequest
	decisions []decided.Span
	sends     []time.Time // when its counted requests left it
	slow      []chaosCall // store calls of slowCall or more
	events    []chaosEvent
	before    int // goroutines at start
	after     int // goroutines after Close
}

type chaosRequest struct {
	from, to time.Time
	failed   bool
	wraps    bool // the failure wraps the Redis store's error
	err      string
}

type chaosCall struct {
	kind     string
	from, to time.Time
}

type chaosEvent struct {
	typ store.EventType
	at  time.Time
}

// startChaosChild starts a chaos child named name with workers workers
// sending requests to api, the budget's failure policy failure.
func startChaosChild(t *testing.T, name, api, redisURL, failure string, workers int) *chaosChild {
	t.Helper()
	env := append(sharedEnv(redisURL, chaosLimit, "second"),
		"KUBERNETES_RATELIMIT_OWNER=chaos-test",
		"KUBERNETES_RATELIMIT_STORE_FAILURE="+failure,
		childAPI+"="+api, childWorkers+"="+strconv.Itoa(workers))
	return &chaosChild{Process: childproc.Start(t, chaosEnv, name, env...)}
}

// chaosStopWithin bounds how long a child may take to stop: closing its
// limiter and its store, and its workers' last requests.
const chaosStopWithin = 30 * time.Second

// stop tells the child to stop, waits for it to end and reads its report.
func (c *chaosChild) stop(t *testing.T) {
	t.Helper()
	r := childproc.Parse(c.Stop(t, chaosStopWithin))
	c.decisions = r.Decisions
	c.sends = r.Sends
	var logs []string
	done := false
	for _, line := range r.Other {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && f[0] == "req":
			r := chaosRequest{from: childproc.Time(f[1]), to: childproc.Time(f[2]), failed: f[3] == "err"}
			if r.failed {
				var msg string
				_, _ = fmt.Sscanf(line, "req %d %d err %t %q", new(int64), new(int64), &r.wraps, &msg)
				r.err = msg
			}
			c.requests = append(c.requests, r)
		case len(f) == 4 && f[0] == "call":
			c.slow = append(c.slow, chaosCall{kind: f[1], from: childproc.Time(f[2]), to: childproc.Time(f[3])})
		case len(f) == 3 && f[0] == "event":
			c.events = append(c.events, chaosEvent{typ: store.EventType(f[1]), at: childproc.Time(f[2])})
		case len(f) == 3 && f[0] == "goroutines":
			c.before, _ = strconv.Atoi(f[1])
			c.after, _ = strconv.Atoi(f[2])
			done = true
		default:
			logs = append(logs, line)
		}
	}
	require.True(t, done, "child %s printed no report: %s", c.Name, c.Output())
	if len(logs) > 0 {
		t.Logf("child %s:\n%s", c.Name, strings.Join(logs, "\n"))
	}
}

// fault is one failure of Redis: from when it was killed or frozen until
// it was started again or thawed.
type fault struct {
	what       string
	start, end time.Time
}

// hold lets the load run for d: these tests measure behaviour over real
// time.
func hold(d time.Duration) { time.Sleep(d) }

// chaos waits until every child sends, then kills and restarts srv, then
// freezes and thaws it, with load running before, between and after, and
// returns the two faults.
func chaos(t *testing.T, srv *redistest.Server, api *apisim.Server, children ...*chaosChild) []fault {
	t.Helper()
	for _, c := range children {
		require.Eventually(t, func() bool { return sentBy(api, c.Name) > 0 }, 30*time.Second, 10*time.Millisecond,
			"child %s sends", c.Name)
	}
	hold(1500 * time.Millisecond)
	kill := outage("kill", srv.Kill, srv.Restart)
	freeze := outage("freeze", srv.Pause, srv.Resume)
	return []fault{kill, freeze}
}

// outage makes Redis fail with down, brings it back with up 1.5 seconds
// later, lets the load run 2.5 seconds more and returns the fault.
func outage(what string, down, up func()) fault {
	f := fault{what: what, start: time.Now()}
	down()
	hold(1500 * time.Millisecond)
	up()
	f.end = time.Now()
	hold(2500 * time.Millisecond)
	return f
}

// sentBy returns how many list requests of the child name reached api.
func sentBy(api *apisim.Server, name string) int {
	return len(arrivalsOf(api, name))
}

// arrivalsOf returns when the list requests of the children named reached
// api, in order.
func arrivalsOf(api *apisim.Server, names ...string) []time.Time {
	_, by := arrivals(api)
	var at []time.Time
	for _, n := range names {
		at = append(at, by[n]...)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	return at
}

// wireSlack is what the server's clock may see of a window less than the
// timespan, as a fraction of it: requests sent a timespan apart may arrive
// a little closer.
const wireSlack = 0.01

// wireWithin checks, on the instants requests reached the server, that no
// window of the chaos timespan (less wireSlack) held more than most, and
// that more than most arrived in all (so that it could fail).
func wireWithin(t *testing.T, what string, at []time.Time, most int) {
	t.Helper()
	wireHolds(t, what, at, most, chaosTimespan)
}

// wireHolds is wireWithin for a timespan of span.
func wireHolds(t *testing.T, what string, at []time.Time, most int, span time.Duration) {
	t.Helper()
	require.Greater(t, len(at), most, "%s: only %d requests reached the server, the check needs %d", what, len(at), most+1)
	window := span - time.Duration(wireSlack*float64(span))
	got := apisim.MostInWindow(at, window)
	assert.LessOrEqual(t, got, most, "%s: %d requests reached the server within %v; the closest %d within %v",
		what, got, window, most+1, tightest(at, most+1))
}

// tightest returns the shortest time within which n of the instants at,
// in order, arrived.
func tightest(at []time.Time, n int) time.Duration {
	best := time.Duration(math.MaxInt64)
	for i := n - 1; i < len(at); i++ {
		best = min(best, at[i].Sub(at[i-n+1]))
	}
	return best
}

// arrivedBetween returns the instants of at from from to to.
func arrivedBetween(at []time.Time, from, to time.Time) []time.Time {
	var in []time.Time
	for _, a := range at {
		if !a.Before(from) && !a.After(to) {
			in = append(in, a)
		}
	}
	return in
}

// requestBound is the longest a request may take: its wait for a slot,
// at most a timespan with every worker of the processes queued (no more
// workers than the limit), another while waiters whose reservations a
// restarted Redis lost take slots again, and two store calls that time
// out (its reservation and its confirmation).
const requestBound = 2*chaosTimespan + 2*callBound

// nothingHangs checks that every store call of the children returned
// within the store's timeout and a margin, and every request within
// requestBound, through both faults.
func nothingHangs(t *testing.T, children ...*chaosChild) {
	t.Helper()
	nothingHangsWithin(t, requestBound, children...)
}

// nothingHangsWithin is nothingHangs with every request within bound.
func nothingHangsWithin(t *testing.T, bound time.Duration, children ...*chaosChild) {
	t.Helper()
	for _, c := range children {
		var slowest time.Duration
		for _, call := range c.slow {
			d := call.to.Sub(call.from)
			slowest = max(slowest, d)
			assert.LessOrEqual(t, d, callBound, "child %s: a %s call took %v, beyond the store timeout %v", c.Name, call.kind, d, storeTimeout)
		}
		var longest time.Duration
		for _, r := range c.requests {
			longest = max(longest, r.to.Sub(r.from))
		}
		assert.LessOrEqual(t, longest, bound, "child %s: a request took %v", c.Name, longest)
		t.Logf("child %s: %d requests, the longest %v; %d store calls of %v or more, the slowest %v",
			c.Name, len(c.requests), longest.Round(time.Millisecond), len(c.slow), slowCall, slowest.Round(time.Millisecond))
	}
}

// nothingLeft checks that no goroutine of a child outlived its limiter's
// and its store's Close.
func nothingLeft(t *testing.T, children ...*chaosChild) {
	t.Helper()
	for _, c := range children {
		assert.LessOrEqual(t, c.after, c.before, "child %s: goroutines left after Close (their stacks are in its log)", c.Name)
	}
}

// outageSeen checks that each child saw each fault as one outage, from a
// moment into it to a moment after Redis was back, and returns, for each
// fault, when the last of them decided on the shared budget again.
func outageSeen(t *testing.T, faults []fault, children ...*chaosChild) (back []time.Time) {
	t.Helper()
	back = make([]time.Time, len(faults))
	for _, c := range children {
		require.Len(t, c.events, 2*len(faults), "child %s: one outage per fault: %v", c.Name, c.events)
		for i, f := range faults {
			down, up := c.events[2*i], c.events[2*i+1]
			require.Equal(t, store.EventDown, down.typ, "child %s, %s", c.Name, f.what)
			require.Equal(t, store.EventUp, up.typ, "child %s, %s", c.Name, f.what)
			assert.True(t, down.at.After(f.start) && down.at.Before(f.end), "child %s: the %s is noticed while it lasts", c.Name, f.what)
			assert.True(t, up.at.After(f.end), "child %s: the %s ends once Redis is back", c.Name, f.what)
			if up.at.After(back[i]) {
				back[i] = up.at
			}
		}
	}
	return back
}

// between returns the decisions that surely lie from from to to.
func between(spans []decided.Span, from, to time.Time) []decided.Span {
	var in []decided.Span
	for _, s := range spans {
		if !s.From.Before(from) && !s.To.After(to) {
			in = append(in, s)
		}
	}
	return in
}

// allDecisions returns the decisions of every child.
func allDecisions(children ...*chaosChild) []decided.Span {
	var all []decided.Span
	for _, c := range children {
		all = append(all, c.decisions...)
	}
	return all
}

// windowWithin checks that no most+1 of spans lie surely within less than
// the timespan, and that spans hold more than most (so that it could fail).
func windowWithin(t *testing.T, what string, spans []decided.Span, most int) {
	t.Helper()
	crowd, ok := decided.Tightest(spans, most+1)
	if !assert.True(t, ok, "%s: only %d decisions, the check needs %d", what, len(spans), most+1) {
		return
	}
	assert.GreaterOrEqual(t, crowd.Within, chaosTimespan, "%s: %d requests let go within %v: %v", what, most+1, chaosTimespan, crowd)
}

// sharedAgain checks the decisions from when every child is back on Redis
// until to: each child decides, the window holds the limit across them,
// and the first child, whose load is the larger, gets more than its share
// of an outage (limit / processes) within some timespan, which only the
// shared budget allows it.
func sharedAgain(t *testing.T, what string, from, to time.Time, children ...*chaosChild) {
	t.Helper()
	for _, c := range children {
		assert.NotEmpty(t, between(c.decisions, from, to), "after the %s, child %s decides again", what, c.Name)
	}
	windowWithin(t, "after the "+what, between(allDecisions(children...), from, to), chaosLimit)
	share := chaosLimit / len(children)
	crowd, ok := decided.Tightest(between(children[0].decisions, from, to), share+1)
	if assert.True(t, ok, "after the %s, child %s decides more than %d times", what, children[0].Name, share) {
		assert.Less(t, crowd.Within, chaosTimespan,
			"after the %s, child %s gets more than its outage share %d within a timespan: it decides on the shared budget", what, children[0].Name, share)
	}
}

// twoProcessChaos runs two children, the first with four times the load
// of the second, on one budget with failure policy failure through both
// faults, checks what every policy promises and returns what ran.
func twoProcessChaos(t *testing.T, failure string) (faults []fault, back []time.Time, children []*chaosChild, api *apisim.Server) {
	srv := redistest.Start(t)
	api = apisim.New()
	t.Cleanup(api.Close)
	// Each request costs the server 20ms: with open, the outage admits
	// what the workers can send, not what a spinning loop can.
	api.SetCapacity(64, 0, 20*time.Millisecond)
	a := startChaosChild(t, "a", api.URL, srv.URL(), failure, 8)
	b := startChaosChild(t, "b", api.URL, srv.URL(), failure, 2)
	children = []*chaosChild{a, b}
	faults = chaos(t, srv, api, a, b)
	end := time.Now()
	for _, c := range children {
		c.stop(t)
	}
	nothingHangs(t, a, b)
	nothingLeft(t, a, b)
	back = outageSeen(t, faults, a, b)
	windowWithin(t, "before the first fault", between(allDecisions(a, b), time.Time{}, faults[0].start), chaosLimit)
	wireWithin(t, "at the server, before the first fault", arrivedBetween(arrivalsOf(api, "a", "b"), time.Time{}, faults[0].start), chaosLimit)
	for _, c := range children {
		// A process knows what it sent itself, whatever Redis does.
		wireWithin(t, "at the server, child "+c.Name+"'s requests", arrivalsOf(api, c.Name), chaosLimit)
	}
	for i, f := range faults {
		until := end
		if i+1 < len(faults) {
			until = faults[i+1].start
		}
		sharedAgain(t, f.what, back[i], until, a, b)
	}
	return faults, back, children, api
}

func TestRedisChaosLocal(t *testing.T) {
	_, _, children, api := twoProcessChaos(t, "local")
	for _, c := range children {
		for _, r := range c.requests {
			assert.False(t, r.failed, "child %s: a request failed: %s", c.Name, r.err)
		}
	}
	// README, "Exact across an outage": with several processes, at most
	// 2 x limit in any window, changeovers included.
	windowWithin(t, "the whole run", allDecisions(children...), 2*chaosLimit)
	wireWithin(t, "at the server, the whole run", arrivalsOf(api, "a", "b"), 2*chaosLimit)
}

func TestRedisChaosOpen(t *testing.T) {
	faults, back, children, _ := twoProcessChaos(t, "open")
	for _, c := range children {
		for _, r := range c.requests {
			assert.False(t, r.failed, "child %s: a request failed: %s", c.Name, r.err)
		}
	}
	// open promises no bound on what an outage admits: only reported.
	for i, f := range faults {
		crowd := mostWithin(between(allDecisions(children...), f.start, back[i]))
		t.Logf("the %s admitted up to %d requests in a timespan (open promises no bound)", f.what, crowd)
	}
}

func TestRedisChaosClosed(t *testing.T) {
	faults, back, children, api := twoProcessChaos(t, "closed")
	failures := 0
	for _, c := range children {
		for _, r := range c.requests {
			if !r.failed {
				continue
			}
			failures++
			assert.True(t, r.wraps, "child %s: a failure wraps Redis's error: %s", c.Name, r.err)
			during := false
			for i, f := range faults {
				during = during || (!r.to.Before(f.start) && !r.to.After(back[i].Add(callBound)))
			}
			assert.True(t, during, "child %s: a request failed outside the outages: %s", c.Name, r.err)
		}
	}
	assert.Positive(t, failures, "requests fail while Redis is unavailable")
	// Nothing is admitted in an outage, so the window holds the limit
	// throughout.
	windowWithin(t, "the whole run", allDecisions(children...), chaosLimit)
	wireWithin(t, "at the server, the whole run", arrivalsOf(api, "a", "b"), chaosLimit)
}

// TestRedisChaosOneProcessLocal: one process alone stays exact across a
// kill and a restart of Redis (README, "Exact across an outage").
func TestRedisChaosOneProcessLocal(t *testing.T) {
	srv := redistest.Start(t)
	api := apisim.New()
	t.Cleanup(api.Close)
	api.SetCapacity(64, 0, 20*time.Millisecond)
	c := startChaosChild(t, "solo", api.URL, srv.URL(), "local", 6)
	require.Eventually(t, func() bool { return sentBy(api, c.Name) > 0 }, 30*time.Second, 10*time.Millisecond, "the child sends")
	hold(1500 * time.Millisecond)
	kill := outage("kill", srv.Kill, srv.Restart)
	c.stop(t)
	nothingHangs(t, c)
	nothingLeft(t, c)
	outageSeen(t, []fault{kill}, c)
	for _, r := range c.requests {
		assert.False(t, r.failed, "a request failed: %s", r.err)
	}
	windowWithin(t, "the whole run", c.decisions, chaosLimit)
	wireWithin(t, "at the server, the whole run", arrivalsOf(api, c.Name), chaosLimit)
}

// mostWithin returns the largest number of spans that surely lie within
// less than a timespan.
func mostWithin(spans []decided.Span) int {
	n := 0
	for {
		crowd, ok := decided.Tightest(spans, n+1)
		if !ok || crowd.Within >= chaosTimespan {
			return n
		}
		n++
	}
}
