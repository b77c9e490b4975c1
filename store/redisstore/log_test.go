package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// outageChild names the mode of TestRedisOutageInAChild when this test
// binary runs as a child process: "none" leaves go-redis's logger to the
// store (NewFromURL sends its lines to klog), "stderr" sets a logger that writes to standard error after the store is
// made, as go-redis's default logger does.
const outageChild = "STORE_TEST_OUTAGE_CHILD"

// A Redis outage a test causes (it kills the redis-server it started) is
// logged through the store's Logger only: the outage's start and end once
// each; go-redis's own lines go to klog at V(1). Nothing reaches standard
// error, also when the program sets no go-redis logger.
// With a go-redis logger on standard error, go-redis writes its dial
// failures there, which is what the test must catch.
func TestRedisOutageLogsOnlyThroughTheLogger(t *testing.T) {
	tests := []struct {
		mode, verbosity string
		wantStderr      bool
	}{
		{mode: "none", verbosity: "0"},
		{mode: "none", verbosity: "1"},
		{mode: "stderr", verbosity: "1", wantStderr: true},
	}
	for _, tt := range tests {
		t.Run(tt.mode+" v"+tt.verbosity, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestRedisOutageInAChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), outageChild+"="+tt.mode, outageChild+"_V="+tt.verbosity)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)

			log := stdout.String()
			assert.Contains(t, log, "Redis store unavailable")
			assert.Contains(t, log, "Redis store available again")
			assert.NotContains(t, log, "failed to dial", "go-redis's lines are klog's")
			if tt.wantStderr {
				assert.Contains(t, stderr.String(), "connection pool: failed to dial", "the defect the router removes")
			} else {
				assert.Empty(t, stderr.String(), "nothing outside the logger")
			}
		})
	}
}

// TestRedisOutageInAChild is the child of
// TestRedisOutageLogsOnlyThroughTheLogger: a store, its Logger on standard
// output, through a Redis outage of a second and a half.
func TestRedisOutageInAChild(t *testing.T) {
	mode := os.Getenv(outageChild)
	if mode == "" {
		t.Skip("run by TestRedisOutageLogsOnlyThroughTheLogger")
	}
	v, err := strconv.Atoi(os.Getenv(outageChild + "_V"))
	require.NoError(t, err)
	logger := funcr.New(func(prefix, args string) { fmt.Println(prefix, args) }, funcr.Options{Verbosity: v})

	srv := redistest.Start(t)
	s, err := redisstore.NewFromURL(srv.URL(), redisstore.Options{Logger: logger, Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	if mode == "stderr" {
		redis.SetLogger(stderrLogger{})
	}
	ctx := context.Background()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: time.Second}
	reserve := func() {
		_, err := s.Reserve(ctx, "k8s:outage:api.example.com", p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err, "the failure policy decides during the outage")
	}
	reserve()
	require.False(t, s.Down())

	srv.Kill()
	// Requests keep coming during the outage, as a controller's would.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		reserve()
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, s.Down())
	srv.Restart()
	require.Eventually(t, func() bool { reserve(); return !s.Down() }, 5*time.Second, 20*time.Millisecond,
		"the probe finds Redis again")
}

// stderrLogger writes go-redis's lines to standard error, as its default
// logger does.
type stderrLogger struct{}

func (stderrLogger) Printf(_ context.Context, format string, v ...any) {
	fmt.Fprintf(os.Stderr, "redis: "+format+"\n", v...)
}
