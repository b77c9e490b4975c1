package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
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
