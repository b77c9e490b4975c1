package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit"
)

// The demo's figures agree with what the simulated server recorded, and a
// window budget keeps every window at the sender within the limit.
func TestDemoFiguresAgreeWithServer(t *testing.T) {
	o := demoOptions{runFlags: runFlags{workers: 10, duration: 1500 * time.Millisecond, limit: 5, timespan: 100 * time.Millisecond}}
	var out bytes.Buffer
	modes := demoModes(o, limiterConfig(t, o))
	r, err := runDemoMode(modes[0], o, &out)
	require.NoError(t, err)

	calls, succeeded := r.stats.calls.Load(), r.stats.succeeded.Load()
	assert.Greater(t, succeeded, int64(20))
	assert.Equal(t, calls, succeeded+r.stats.cutOff.Load(), "every call succeeded but those the end of the run cut off")
	assert.LessOrEqual(t, r.stats.cutOff.Load(), int64(o.workers), "a worker's last call at most")
	assert.Zero(t, r.stats.rejected.Load(), "no max wait, no rejection")
	assert.Zero(t, r.throttled, "a budget well under capacity draws no 429")
	// Without 429s there are no retries: every call is at most one request
	// at the server (a call cut off while waiting for the budget is none).
	assert.GreaterOrEqual(t, r.serverSeen, int(succeeded))
	assert.LessOrEqual(t, r.serverSeen, int(calls))
	admitted := r.stats.atOnce.Load() + r.stats.deferred.Load()
	assert.GreaterOrEqual(t, admitted, succeeded, "every request sent was admitted once")
	assert.LessOrEqual(t, admitted, calls)
	// The store's property tests prove the decisions exact on a fake clock.
	// Here real goroutines confirm their slots a little late now and then
	// (the race detector makes it worse), so windows are measured with a
	// tolerance of 10%.
	assert.LessOrEqual(t, r.released.mostInWindow(o.timespan*9/10), o.limit, "no window of released requests holds more than the budget")
	// 10 workers over 1.5s at 5 per 100ms: about 75 calls, never many more.
	assert.LessOrEqual(t, calls, int64(5*16+10))
}

func TestDemoCommandPrintsTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run([]string{"demo", "-duration", "1s", "-workers", "8", "-limit", "4", "-timespan", "100ms", "-compare"}, nil, &stdout, &stderr)
	require.Equal(t, 0, status, stderr.String())
	out := stdout.String()
	for _, want := range []string{"k8sratelimit", "client-go default", "no limiter", "calls made", "429s received",
		"most sent in any 99ms* (budget 4)", "most received by the server in any 100ms**"} {
		assert.Contains(t, out, want)
	}
	// Not a terminal: progress comes as plain lines, never carriage returns.
	assert.NotContains(t, out, "\r")
	assert.Regexp(t, `(?m)^k8sratelimit +\[#+\] `, out, "a progress line per interval")
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "-workers", "0"},
		{"demo", "-duration", "-1s"},
		{"demo", "-limit", "0"},
		{"demo", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, nil, &stdout, &stderr), strings.Join(args, " "))
		assert.NotEmpty(t, stderr.String())
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"demo"}, []string{"KUBERNETES_RATELIMIT_MAXWAIT=1"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "KUBERNETES_RATELIMIT_MAXWAIT")
}

// limiterConfig is the demo's limiter configuration for o, from an empty
// environment.
func limiterConfig(t *testing.T, o demoOptions) k8sratelimit.Config {
	t.Helper()
	cfg, err := o.config(nil)
	require.NoError(t, err)
	return cfg
}
