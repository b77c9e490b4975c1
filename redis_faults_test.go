package k8sratelimit_test

// The wire-level fault tests: the promises of docs/redis.md ("When Redis
// fails") checked on the instants requests reached the API server, for
// the faults production Redis sees: a restart that loses its data (at once
// or after a while), a kill, a freeze, with one process and with several.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// redisFault is one way Redis fails: down takes it down, and up, after
// the fault's length, brings it back.
type redisFault struct {
	name     string
	down, up func(*redistest.Server)
	length   time.Duration
}

var (
	// restart loses Redis's data (it persists nothing) and starts it again
	// after length.
	restartAfter = func(d time.Duration) redisFault {
		return redisFault{name: fmt.Sprintf("restart after %v", d), down: (*redistest.Server).Kill, up: (*redistest.Server).Restart, length: d}
	}
	// instantRestart loses Redis's data and starts it again at once: no
	// call may ever fail.
	instantRestart = redisFault{name: "instant restart", down: (*redistest.Server).Restart, up: func(*redistest.Server) {}}
	freezeFor      = func(d time.Duration) redisFault {
		return redisFault{name: fmt.Sprintf("freeze for %v", d), down: (*redistest.Server).Pause, up: (*redistest.Server).Resume, length: d}
	}
)

// TestRedisFaultsAtTheWire runs processes sharing one budget of chaosLimit
// a second through each fault, under more load than the budget, and
// checks at the server: one process alone never exceeds the limit in any
// timespan; several never exceed twice the limit, and each of them never
// exceeds the limit on its own.
func TestRedisFaultsAtTheWire(t *testing.T) {
	cases := []struct {
		fault     redisFault
		policy    string
		processes int
		workers   int
	}{
		{instantRestart, "local", 1, 20},
		{instantRestart, "local", 1, 60}, // three times the limit waiting
		{instantRestart, "closed", 1, 20},
		{restartAfter(2 * time.Second), "local", 1, 20},
		{restartAfter(300 * time.Millisecond), "closed", 1, 20},
		{freezeFor(2 * time.Second), "local", 1, 20},
		{instantRestart, "local", 3, 10},
		{restartAfter(time.Second), "local", 3, 10},
		{freezeFor(2 * time.Second), "local", 3, 20},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s/%d processes of %d workers", c.fault.name, c.policy, c.processes, c.workers), func(t *testing.T) {
			srv := redistest.Start(t)
			api := apisim.New()
			t.Cleanup(api.Close)
			api.SetCapacity(64, 0, 20*time.Millisecond)
			var names []string
			var children []*chaosChild
			for i := range c.processes {
				name := fmt.Sprintf("p%d", i)
				names = append(names, name)
				children = append(children, startChaosChild(t, name, api.URL, srv.URL(), c.policy, c.workers))
			}
			for _, ch := range children {
				require.Eventually(t, func() bool { return sentBy(api, ch.Name) > 0 }, 30*time.Second, 10*time.Millisecond,
					"child %s sends", ch.Name)
			}
			hold(1500 * time.Millisecond)
			c.fault.down(srv)
			hold(c.fault.length)
			c.fault.up(srv)
			up := time.Now()
			hold(3500 * time.Millisecond)
			for _, ch := range children {
				ch.stop(t)
			}
			// A request may wait for the fault, and for the requests
			// queued ahead of it three times: in the shared budget, in its
			// process's share of it while Redis cannot be asked, and in the
			// shared budget again when Redis lost its reservation.
			queue := time.Duration(float64(c.processes*c.workers) / chaosLimit * float64(chaosTimespan))
			nothingHangsWithin(t, c.fault.length+3*queue+2*callBound, children...)
			nothingLeft(t, children...)
			for _, ch := range children {
				wireWithin(t, "child "+ch.Name, arrivalsOf(api, ch.Name), chaosLimit)
			}
			all := arrivalsOf(api, names...)
			if c.processes > 1 {
				wireWithin(t, "all children", all, 2*chaosLimit)
			}
			// Once Redis is back, the processes have found it (a probe a
			// second) and the sends of the outage, which Redis learns
			// then, have left the window (a timespan), the budget is
			// used again: the waiters take the new slots.
			from := up.Add(2500 * time.Millisecond)
			again := arrivedBetween(all, from, from.Add(chaosTimespan))
			assert.GreaterOrEqual(t, len(again), chaosLimit/2, "requests reaching the server in the timespan from %v after the fault", from.Sub(up))
			if c.policy == "local" {
				for _, ch := range children {
					for _, r := range ch.requests {
						assert.False(t, r.failed, "child %s: a request failed: %s", ch.Name, r.err)
					}
				}
			}
		})
	}
}
