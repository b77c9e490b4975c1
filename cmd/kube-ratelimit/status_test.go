package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

func TestStatusCommandShowsSharedBudgets(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	// Two processes' worth of stores use one budget; another owner uses
	// its own.
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 3, Timespan: time.Minute}
	a := redisstore.New(srv.Client(), redisstore.Options{Presence: 50 * time.Millisecond})
	b := redisstore.New(srv.Client(), redisstore.Options{Presence: 50 * time.Millisecond})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	// Their limiters report the seats of the shared budget: a limit of 4
	// learned by both, 3 seats held by one, 1 by the other.
	a.ReportSeats("k8s:ops:api.example.com", func() (int, int) { return 4, 3 })
	b.ReportSeats("k8s:ops:api.example.com", func() (int, int) { return 4, 1 })
	// Both have a request waiting, so that both stay present however long
	// the test takes (a process with nothing waiting is present only while
	// it sends) and status counts both reports.
	for _, s := range []*redisstore.Store{a, a, b, b, a} {
		_, err := s.Reserve(ctx, "k8s:ops:api.example.com", p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err)
	}
	_, err := a.SetCooldown(ctx, "k8s:ops:api.example.com", p, 30*time.Second)
	require.NoError(t, err)
	for range 4 { // the fourth waits: a stays present on this budget too
		_, err = a.Reserve(ctx, "k8s:dev:api.example.com", p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err)
	}

	env := []string{"KUBERNETES_RATELIMIT_STORE=redis", "KUBERNETES_RATELIMIT_OWNER=ops", "KUBERNETES_RATELIMIT_REDIS_URL=" + srv.URL()}
	var stdout, stderr bytes.Buffer
	var out string
	require.Eventually(t, func() bool {
		stdout.Reset()
		require.Equal(t, 0, run([]string{"status"}, env, &stdout, &stderr), stderr.String())
		out = stdout.String()
		return strings.Contains(out, " 4/4\n")
	}, 5*time.Second, 50*time.Millisecond, "the seats reports reach Redis within a few presence intervals")
	assert.Regexp(t, `(?m)^k8s:ops:api\.example\.com +window +3/3 +1m0s +2 +2 +(29\.\d|30)s +4/4$`, out,
		"3 of 3 sent in the window, 2 waiting, 2 processes, the cooldown left, 4 of 4 seats held")
	assert.Regexp(t, `(?m)^k8s:dev:api\.example\.com +window +3/3 +1m0s +1 +1 +- +-$`, out)
	assert.Regexp(t, `^Budgets in Redis at \d\d:\d\d:\d\d\nBUDGET `, out)

	stdout.Reset()
	require.Equal(t, 0, run([]string{"status", "-owner", "dev"}, env, &stdout, &stderr), stderr.String())
	assert.NotContains(t, stdout.String(), "k8s:ops:")
	assert.Contains(t, stdout.String(), "k8s:dev:")
}

func TestStatusCommandNeedsRedis(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"status"}, nil, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "KUBERNETES_RATELIMIT_STORE=redis")
}

// budgetsFunc is a budgetLister.
type budgetsFunc func(ctx context.Context) ([]store.BudgetStatus, error)

func (f budgetsFunc) Status(ctx context.Context) ([]store.BudgetStatus, error) { return f(ctx) }

// watchView returns a statusView over a fixed budget whose watch refreshes
// twice, each refresh one interval later on a fake clock.
func watchView(out *screen) statusView {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC))
	waits := 0
	return statusView{
		budgets: budgetsFunc(func(context.Context) ([]store.BudgetStatus, error) {
			return []store.BudgetStatus{{Key: "k8s:ops:api.example.com", Strategy: store.StrategyWindow, Limit: 400, Timespan: time.Minute, Used: 12, Processes: 1}}, nil
		}),
		clock:    clk,
		out:      out,
		interval: 2 * time.Second,
		wait: func(context.Context) bool {
			waits++
			clk.Step(2 * time.Second)
			return waits < 3
		},
	}
}

// Not on a terminal, -watch appends one labelled table after another.
func TestStatusWatchAppendsWhenNotATerminal(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, watchView(&screen{w: &out}).run(context.Background()))
	got := out.String()
	assert.NotContains(t, got, "\x1b[")
	tables := strings.Split(got, "\n\n")
	require.Len(t, tables, 3, got)
	for i, at := range []string{"15:04:05", "15:04:07", "15:04:09"} {
		assert.True(t, strings.HasPrefix(tables[i], "Budgets in Redis at "+at+" (every 2s; Ctrl-C to stop)\nBUDGET "), tables[i])
		assert.Regexp(t, `(?m)^k8s:ops:api\.example\.com +window +12/400 +1m0s +0 +1 +- +-$`, tables[i])
	}
}

// On a terminal, -watch redraws: every table starts by moving the cursor
// home and clearing the screen.
func TestStatusWatchRedrawsOnATerminal(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, watchView(&screen{w: &out, redraw: true}).run(context.Background()))
	frames := strings.Split(out.String(), clearScreen)
	require.Len(t, frames, 4, out.String())
	assert.Empty(t, frames[0])
	for _, f := range frames[1:] {
		assert.True(t, strings.HasPrefix(f, "Budgets in Redis at "), f)
		assert.False(t, strings.HasPrefix(f, "\n"))
	}
}

// Without -watch the table is printed once, labelled with its time.
func TestStatusOnce(t *testing.T) {
	var out bytes.Buffer
	v := watchView(&screen{w: &out})
	v.wait = nil
	require.NoError(t, v.run(context.Background()))
	assert.True(t, strings.HasPrefix(out.String(), "Budgets in Redis at 15:04:05\nBUDGET "), out.String())
	assert.Equal(t, 1, strings.Count(out.String(), "BUDGET"))
}

func TestStatusReadError(t *testing.T) {
	var out bytes.Buffer
	v := watchView(&screen{w: &out})
	v.budgets = budgetsFunc(func(context.Context) ([]store.BudgetStatus, error) {
		return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	})
	assert.EqualError(t, v.run(context.Background()), "dial tcp 127.0.0.1:1: connect: connection refused")
	assert.Empty(t, out.String())
}

// A Redis that cannot be used is named, its URL redacted, with the cause
// in words that say what to fix, then the error itself.
func TestStatusCommandSaysWhyRedisIsUnusable(t *testing.T) {
	srv := redistest.Start(t)
	require.NoError(t, srv.Client().ConfigSet(context.Background(), "requirepass", "right-one").Err())
	tests := []struct {
		url, want string
	}{
		{url: "redis://127.0.0.1:1", want: "kube-ratelimit status: cannot read the budgets: Redis at redis://127.0.0.1:1 is unusable (unreachable): dial tcp 127.0.0.1:1: "},
		{url: "redis://:wrong-one@" + srv.Addr() + "/0", want: "kube-ratelimit status: cannot read the budgets: Redis at redis://:xxxxx@" + srv.Addr() + "/0 is unusable (authentication failed): WRONGPASS "},
	}
	for _, tt := range tests {
		env := []string{"KUBERNETES_RATELIMIT_STORE=redis", "KUBERNETES_RATELIMIT_OWNER=ops", "KUBERNETES_RATELIMIT_REDIS_URL=" + tt.url}
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 1, run([]string{"status"}, env, &stdout, &stderr))
		assert.True(t, strings.HasPrefix(stderr.String(), tt.want), stderr.String())
		assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %s", stderr.String())
		assert.NotContains(t, stderr.String(), "wrong-one", "the password is never printed")
		assert.Empty(t, stdout.String())
	}
}
