package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// writeKubeconfig writes a kubeconfig with one context, "sim", for host.
func writeKubeconfig(t *testing.T, host string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := `apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster: {server: "` + host + `"}
users:
- name: sim
  user: {token: "t"}
contexts:
- name: sim
  context: {cluster: sim, user: sim}
- name: other
  context: {cluster: sim, user: sim}
current-context: other
`
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestLoadCommandAgainstAServer(t *testing.T) {
	srv := apisim.New()
	defer srv.Close()
	kubeconfig := writeKubeconfig(t, srv.URL)

	var stdout, stderr bytes.Buffer
	env := []string{"KUBERNETES_RATELIMIT=10", "KUBERNETES_RATELIMIT_TIMESPAN=second"}
	status := run([]string{"load", "-kubeconfig", kubeconfig, "-context", "sim", "-workers", "4", "-duration", "1500ms"}, env, &stdout, &stderr)
	require.Equal(t, 0, status, stderr.String())
	out := stdout.String()

	m := regexp.MustCompile(`requests sent \(incl\. retries\)\s+(\d+)`).FindStringSubmatch(out)
	require.Len(t, m, 2, out)
	sent, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Equal(t, len(srv.Requests()), sent, "the table counts what the server received")
	assert.LessOrEqual(t, sent, 2*10+4, "10 per second for 1.5s, and calls in flight at the end")
	assert.Positive(t, srv.Count("/api/v1/namespaces"))
	assert.Positive(t, srv.Count("/version"))
	for _, r := range srv.Requests() {
		assert.Equal(t, "GET", r.Method, "the load only reads")
	}
	assert.Contains(t, out, "most sent in any 990ms* (budget 10)")
}

func TestLoadCommandRejectsBadUse(t *testing.T) {
	for _, args := range [][]string{
		{"load"},
		{"load", "-kubeconfig", filepath.Join(t.TempDir(), "missing")},
		{"load", "-kubeconfig", "x", "-workers", "0"},
		{"load", "-kubeconfig", "x", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(args, nil, &stdout, &stderr), args)
		assert.NotEmpty(t, stderr.String(), args)
	}
}

// With the Redis store, the table gives the most requests sent in a window
// (not 0, which it gave when only the memory store's decisions were
// recorded), and says when Redis could not be used: which, why, and that
// the budget was then decided per process.
func TestLoadCommandWithRedis(t *testing.T) {
	redisSrv := redistest.Start(t)
	require.NoError(t, redisSrv.Client().ConfigSet(context.Background(), "requirepass", "right-one").Err())
	tests := []struct {
		name, password string
		wantUnusable   bool
	}{
		{name: "usable", password: "right-one"},
		{name: "wrong password", password: "wrong-one", wantUnusable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := apisim.New()
			defer srv.Close()
			url := "redis://:" + tt.password + "@" + redisSrv.Addr() + "/0"
			env := []string{"KUBERNETES_RATELIMIT=10", "KUBERNETES_RATELIMIT_TIMESPAN=second",
				"KUBERNETES_RATELIMIT_STORE=redis", "KUBERNETES_RATELIMIT_OWNER=load-" + strings.ReplaceAll(tt.name, " ", "-"),
				"KUBERNETES_RATELIMIT_REDIS_URL=" + url}
			var stdout, stderr bytes.Buffer
			status := run([]string{"load", "-kubeconfig", writeKubeconfig(t, srv.URL), "-context", "sim", "-workers", "4", "-duration", "1500ms"}, env, &stdout, &stderr)
			require.Equal(t, 0, status, stderr.String())
			out := stdout.String()

			m := regexp.MustCompile(`most sent in any 990ms\* \(budget 10\)\s+(\d+)`).FindStringSubmatch(out)
			require.Len(t, m, 2, out)
			most, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			assert.Positive(t, most, "requests were sent: %s", out)
			assert.LessOrEqual(t, most, srv.MaxInWindow(time.Second)+1, "no more than the server saw in a window, give or take the edge")
			assert.NotContains(t, out, tt.password, "the password is never printed")
			const line = "Redis at redis://:xxxxx@"
			if !tt.wantUnusable {
				assert.NotContains(t, out, line)
				return
			}
			assert.Contains(t, out, line+redisSrv.Addr()+"/0 was unusable (authentication failed): ")
			assert.Contains(t, out, "decided by a budget per process")
		})
	}
}
