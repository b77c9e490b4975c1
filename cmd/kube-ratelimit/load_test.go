package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
)

// stopTolerance is how long after its duration a run may end: the
// workers' goroutines return once their calls see the context end, under
// the race detector on a busy machine.
const stopTolerance = 500 * time.Millisecond

// simRun is a run of the load against a simulated API server.
type simRun struct {
	st      *stats
	elapsed time.Duration
	// refusals are the RateLimitExceededErrors the calls returned, for the
	// maximum wait (maxWait) and for the end of the run (deadline).
	maxWait, deadline atomic.Int64
	// retryAfter is the shortest RetryAfter of a refusal for the maximum
	// wait, in ns.
	retryAfter atomic.Int64
}

// runSim runs the load's calls (namespace lists and /version) through a
// limiter with cfg, from workers clientsets, for duration, against srv.
func runSim(t *testing.T, srv *apisim.Server, cfg k8sratelimit.Config, workers int, duration time.Duration) *simRun {
	t.Helper()
	r := &simRun{st: &stats{}}
	r.retryAfter.Store(int64(time.Hour))
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithObserver(r.st))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	rc := &rest.Config{Host: srv.URL}
	require.NoError(t, l.Configure(rc))

	load := namespacesAndVersion()
	call := func(ctx context.Context, cs kubernetes.Interface) error {
		err := load(ctx, cs)
		var rle *rlerrors.RateLimitExceededError
		switch {
		case !errors.As(err, &rle):
		case rle.Err == nil:
			r.maxWait.Add(1)
			for d := int64(rle.RetryAfter()); ; {
				old := r.retryAfter.Load()
				if d >= old || r.retryAfter.CompareAndSwap(old, d) {
					break
				}
			}
		default:
			r.deadline.Add(1)
		}
		return err
	}
	start := time.Now()
	require.NoError(t, runLoad(context.Background(), rc, loadSpec{workers: workers, duration: duration, call: call}, r.st,
		func(time.Time, time.Time) {}, 100*time.Millisecond))
	r.elapsed = time.Since(start)

	st := r.st
	assert.Equal(t, st.calls.Load(), st.finished(), "every call is counted once: succeeded, rejected, cut off or failed")
	assert.Zero(t, st.failed.Load())
	assert.Zero(t, st.inProgress.Load())
	return r
}

// simConfig is an enabled configuration of limit per timespan, from an
// empty environment.
func simConfig(t *testing.T, limit int, timespan time.Duration, maxWait *time.Duration) k8sratelimit.Config {
	t.Helper()
	cfg, err := runFlags{limit: limit, timespan: timespan}.config(nil)
	require.NoError(t, err)
	cfg.MaxWait = maxWait
	return cfg
}

func ptr[T any](v T) *T { return &v }

// The run ends at its duration, whatever its calls wait for: a slot a
// minute away (with or without a maximum wait), or a server that holds
// every request.
func TestLoadStopsAtItsDuration(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		per     time.Duration
		maxWait *time.Duration
		hold    bool // the server holds every request for a minute
	}{
		{name: "budget a minute away", limit: 2, per: time.Minute},
		{name: "budget a minute away, max wait", limit: 2, per: time.Minute, maxWait: ptr(10 * time.Millisecond)},
		{name: "server holds the calls", limit: 1000, per: time.Second, hold: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := apisim.New()
			t.Cleanup(srv.Close)
			if tt.hold {
				srv.SetCapacity(1, 100, time.Minute)
			}
			const duration = time.Second
			r := runSim(t, srv, simConfig(t, tt.limit, tt.per, tt.maxWait), 4, duration)

			assert.GreaterOrEqual(t, r.elapsed, duration)
			assert.Less(t, r.elapsed, duration+stopTolerance, "stops at its duration")
			if tt.maxWait == nil {
				assert.Positive(t, r.st.cutOff.Load(), "calls still waiting at the end are cut off")
			} else {
				assert.Positive(t, r.st.rejected.Load(), "refused, then waiting RetryAfter until the end")
			}
			assert.LessOrEqual(t, r.st.calls.Load(), int64(4+tt.limit)*2, "no worker spins")
		})
	}
}

// The table's rejections are the RateLimitExceededErrors for the maximum
// wait the calls returned: none without a maximum wait, even when the
// run's end leaves slots out of reach; and a worker refused waits
// RetryAfter before its next call instead of spinning.
func TestLoadCountsRejectionsAsReturned(t *testing.T) {
	t.Run("no max wait", func(t *testing.T) {
		srv := apisim.New()
		t.Cleanup(srv.Close)
		r := runSim(t, srv, simConfig(t, 2, time.Minute, nil), 4, 500*time.Millisecond)
		assert.Zero(t, r.maxWait.Load())
		assert.Zero(t, r.st.rejected.Load(), "max wait none: nothing is rejected by it")
		assert.Positive(t, r.st.cutOff.Load(), "calls waiting for slots beyond the end of the run")
		assert.Equal(t, int64(2), r.st.succeeded.Load())
	})
	t.Run("max wait", func(t *testing.T) {
		srv := apisim.New()
		t.Cleanup(srv.Close)
		const workers, duration, limit = 4, 2 * time.Second, 5
		r := runSim(t, srv, simConfig(t, limit, time.Second, ptr(20*time.Millisecond)), workers, duration)
		assert.Positive(t, r.maxWait.Load())
		assert.Equal(t, r.maxWait.Load(), r.st.rejected.Load(), "rejected counts the errors returned for the maximum wait")
		assert.Zero(t, r.deadline.Load(), "the run is cancelled at its end, not given a deadline to refuse slots by")

		// Each refused worker sleeps RetryAfter: a worker makes about one
		// call per RetryAfter, and one more for each slot it is given.
		retry := time.Duration(r.retryAfter.Load())
		require.Greater(t, retry, 20*time.Millisecond, "a refusal's slot is beyond the maximum wait")
		perWorker := int64(duration/retry) + 2
		sent := int64(limit * 3) // at most 5 in any second of 2
		assert.LessOrEqual(t, r.st.calls.Load(), workers*perWorker+sent, "workers do not spin on refusals")
		assert.LessOrEqual(t, int(r.st.succeeded.Load()), limit*3)
	})
}

// load takes -limit and -timespan as demo does, stops at its duration,
// says it waits for the budget instead of repeating a line, and counts no
// rejection without a maximum wait.
func TestLoadCommandWaitsForTheBudget(t *testing.T) {
	srv := apisim.New()
	t.Cleanup(srv.Close)
	kubeconfig := writeKubeconfig(t, srv.URL)

	var stdout, stderr bytes.Buffer
	start := time.Now()
	status := run([]string{"load", "-kubeconfig", kubeconfig, "-workers", "3", "-duration", "2500ms", "-limit", "2", "-timespan", "1m"},
		nil, &stdout, &stderr)
	elapsed := time.Since(start)
	require.Equal(t, 0, status, stderr.String())
	assert.Less(t, elapsed, 2500*time.Millisecond+stopTolerance, "stops at its duration")

	out := stdout.String()
	assert.Contains(t, out, "Budget: 2 requests per 1m0s (window strategy, max wait none)")
	assert.Regexp(t, `(?m)^k8sratelimit +\[#+\.*\] +\d+\.\ds  waiting for the budget: next slot in (5\d|60)s$`, out)
	assert.Regexp(t, `rejected by max wait\s+0\n`, out)
	assert.Regexp(t, `cut off by the end of the run\s+3\n`, out, "each worker's last call: its slot beyond the end")
	assert.Contains(t, out, "most sent in any 59.4s* (budget 2)")
	assert.Equal(t, 2, srv.Count("/"), "two calls in the budget, none after")

	lines := regexp.MustCompile(`(?m)^k8sratelimit +\[.*$`).FindAllString(out, -1)
	seen := map[string]bool{}
	for _, l := range lines {
		status := l[strings.Index(l, "s  ")+3:]
		assert.False(t, seen[status], "repeated progress line %q", l)
		seen[status] = true
	}
}

// As plain lines, progress says what changed: counts when calls finish,
// the budget's next slot once while nothing finishes.
func TestProgressSaysWhenWaiting(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, "load", 10*time.Second)
	t0 := time.Now()
	slot := t0.Add(12 * time.Second)
	p.update(t0.Add(1*time.Second), time.Second, snapshot{calls: 5, inProgress: 1})
	p.update(t0.Add(2*time.Second), 2*time.Second, snapshot{calls: 5, inProgress: 1, idle: time.Second, nextSlot: slot})
	p.update(t0.Add(3*time.Second), 3*time.Second, snapshot{calls: 5, inProgress: 1, idle: 2 * time.Second, nextSlot: slot})
	p.update(t0.Add(4*time.Second), 4*time.Second, snapshot{calls: 5, inProgress: 1, idle: 3 * time.Second})
	p.update(t0.Add(5*time.Second), 5*time.Second, snapshot{calls: 6, inProgress: 1, nextSlot: slot})
	want := []string{
		"load               [##..................]  1.0s  calls      5  429s     0  in progress   1",
		"load               [####................]  2.0s  waiting for the budget: next slot in 10s",
		"load               [##########..........]  5.0s  calls      6  429s     0  in progress   1",
	}
	assert.Equal(t, strings.Join(want, "\n")+"\n", out.String())
}

// -limit and -timespan override the environment's budget when given; load
// keeps the environment's otherwise, demo has its own defaults.
func TestRunFlagsSetTheBudget(t *testing.T) {
	env := []string{"KUBERNETES_RATELIMIT=10", "KUBERNETES_RATELIMIT_TIMESPAN=second"}
	tests := []struct {
		args         []string
		wantLimit    int
		wantTimespan time.Duration
		wantErr      string
	}{
		{args: []string{"load", "-kubeconfig", "k"}, wantLimit: 10, wantTimespan: time.Second},
		{args: []string{"load", "-kubeconfig", "k", "-limit", "3"}, wantLimit: 3, wantTimespan: time.Second},
		{args: []string{"load", "-kubeconfig", "k", "-timespan", "250ms"}, wantLimit: 10, wantTimespan: 250 * time.Millisecond},
		{args: []string{"load", "-kubeconfig", "k", "-limit", "0"}, wantErr: "KUBERNETES_RATELIMIT"},
		{args: []string{"demo"}, wantLimit: 20, wantTimespan: 100 * time.Millisecond},
		{args: []string{"demo", "-limit", "7", "-timespan", "1s"}, wantLimit: 7, wantTimespan: time.Second},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var f runFlags
			var stderr bytes.Buffer
			if tt.args[0] == "load" {
				o, err := parseLoadFlags(tt.args[1:], &stderr)
				require.NoError(t, err)
				f = o.runFlags
			} else {
				o, err := parseDemoFlags(tt.args[1:], &stderr)
				require.NoError(t, err)
				f = o.runFlags
			}
			cfg, err := f.config(env)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantLimit, cfg.Limit)
			assert.Equal(t, tt.wantTimespan, cfg.Timespan)
		})
	}
}
