package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	for _, s := range []*redisstore.Store{a, a, b, b} {
		_, err := s.Reserve(ctx, "k8s:ops:api.example.com", p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err)
	}
	_, err := a.SetCooldown(ctx, "k8s:ops:api.example.com", p, 30*time.Second)
	require.NoError(t, err)
	_, err = a.Reserve(ctx, "k8s:dev:api.example.com", p, store.Request{MaxWait: store.NoMaxWait})
	require.NoError(t, err)

	env := []string{"KUBERNETES_RATELIMIT_STORE=redis", "KUBERNETES_RATELIMIT_OWNER=ops", "KUBERNETES_RATELIMIT_REDIS_URL=" + srv.URL()}
	var stdout, stderr bytes.Buffer
	var out string
	require.Eventually(t, func() bool {
		stdout.Reset()
		require.Equal(t, 0, run([]string{"status"}, env, &stdout, &stderr), stderr.String())
		out = stdout.String()
		return strings.Contains(out, " 4/4\n")
	}, 5*time.Second, 50*time.Millisecond, "the seats reports reach Redis within a few presence intervals")
	assert.Regexp(t, `(?m)^k8s:ops:api\.example\.com +window +3/3 +1m0s +1 +2 +(29\.\d|30)s +4/4$`, out,
		"3 of 3 sent in the window, 1 waiting, 2 processes, the cooldown left, 4 of 4 seats held")
	assert.Regexp(t, `(?m)^k8s:dev:api\.example\.com +window +1/3 +1m0s +0 +1 +- +-$`, out)

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
