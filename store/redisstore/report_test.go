package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// logLines records what a logger is given, one line per call. It is safe
// for concurrent use.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

// count returns the lines that contain every one of subs.
func (l *logLines) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

const (
	unavailable = "Redis store unavailable"
	recovered   = "Redis store available again"
)

// reportStore makes a store on rawURL whose logs go to lines.
func reportStore(t *testing.T, rawURL string, lines *logLines) *redisstore.Store {
	t.Helper()
	s, err := redisstore.NewFromURL(rawURL, redisstore.Options{Logger: lines.logger(), Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// keepReserving reserves on s for d, as a controller's requests keep
// coming during an outage: none may bring a report of its own.
func keepReserving(t *testing.T, s *redisstore.Store, d time.Duration) {
	t.Helper()
	p := store.Policy{Strategy: store.StrategyWindow, Limit: 1000, Timespan: time.Second}
	for end := time.Now().Add(d); time.Now().Before(end); {
		_, err := s.Reserve(context.Background(), "k8s:report:api.example.com", p, store.Request{MaxWait: store.NoMaxWait})
		require.NoError(t, err, "the failure policy decides")
		time.Sleep(20 * time.Millisecond) // pacing the requests of a real client
	}
}

// A wrong password is reported once, at start, as an authentication
// failure, the URL redacted; through a second and more of requests and
// failed probes, nothing more; once the server accepts the password, the
// recovery is reported once.
func TestRedisReportsAWrongPasswordOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	require.NoError(t, srv.Client().ConfigSet(ctx, "requirepass", "right-one").Err())
	var lines logLines
	s := reportStore(t, "redis://:wrong-one@"+srv.Addr()+"/0", &lines)

	require.Eventually(t, func() bool { return lines.count(unavailable) > 0 }, 5*time.Second, 10*time.Millisecond,
		"reported at start, before any request")
	keepReserving(t, s, 1200*time.Millisecond)
	assert.Equal(t, 1, lines.count(unavailable, `"cause"="authentication failed"`, `"redis"="redis://:xxxxx@`+srv.Addr()+`/0"`), "%s", &lines)
	assert.Equal(t, 1, lines.count(unavailable), "once per outage, not per request or probe:\n%s", &lines)
	assert.Zero(t, lines.count("still unavailable"), "the cause did not change:\n%s", &lines)

	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "right-one"})
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.ConfigSet(ctx, "requirepass", "wrong-one").Err())
	require.Eventually(t, func() bool { return !s.Down() }, 5*time.Second, 10*time.Millisecond)
	keepReserving(t, s, 200*time.Millisecond)
	assert.Equal(t, 1, lines.count(recovered, `"redis"="redis://:xxxxx@`+srv.Addr()+`/0"`), "%s", &lines)
	assert.NotContains(t, lines.String(), "wrong-one", "the password is never printed")
	assert.NotContains(t, lines.String(), "right-one")
}

// A server killed under a store is reported once as unreachable, and once
// when it is back; the restarted server lost the budgets (and the store's
// functions with them), which is reported once too.
func TestRedisReportsAKilledServerOnce(t *testing.T) {
	srv := redistest.Start(t)
	var lines logLines
	s := reportStore(t, srv.URL(), &lines)
	keepReserving(t, s, 50*time.Millisecond)
	require.False(t, s.Down())

	srv.Kill()
	keepReserving(t, s, 1200*time.Millisecond)
	require.True(t, s.Down())
	assert.Equal(t, 1, lines.count(unavailable, `"cause"="unreachable"`, `"redis"="`+srv.URL()+`"`), "%s", &lines)
	assert.Equal(t, 1, lines.count(unavailable), "%s", &lines)
	assert.Zero(t, lines.count(recovered))

	srv.Restart()
	require.Eventually(t, func() bool { return !s.Down() }, 5*time.Second, 10*time.Millisecond)
	keepReserving(t, s, 200*time.Millisecond)
	assert.Equal(t, 1, lines.count(recovered), "%s", &lines)
	assert.Equal(t, 1, lines.count("Redis lost the store's functions"), "%s", &lines)
	assert.Equal(t, 1, lines.count(unavailable), "%s", &lines)
}

// A server that is down when the store starts is reported at start, before
// any request, and its coming up once.
func TestRedisReportsAServerDownAtStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	var lines logLines
	s := reportStore(t, srv.URL(), &lines)
	require.Eventually(t, func() bool { return lines.count(unavailable, `"cause"="unreachable"`) == 1 }, 5*time.Second, 10*time.Millisecond,
		"%s", &lines)
	assert.True(t, s.Down(), "the failure policy decides from the first request")

	srv.Restart()
	require.Eventually(t, func() bool { return lines.count(recovered) == 1 }, 5*time.Second, 10*time.Millisecond)
	keepReserving(t, s, 200*time.Millisecond)
	assert.Equal(t, 1, lines.count(unavailable), "%s", &lines)
	assert.Equal(t, 1, lines.count(recovered), "%s", &lines)
}

// A server whose user may not run scripts or functions (an ACL without
// @scripting, as some managed offerings set) is reported once at start,
// as scripting refused.
func TestRedisReportsScriptingRefusedOnce(t *testing.T) {
	srv := redistest.Start(t, "--user", "default", "on", "nopass", "~*", "&*", "+@all", "-@scripting")
	var lines logLines
	s := reportStore(t, srv.URL(), &lines)
	require.Eventually(t, func() bool { return lines.count(unavailable) > 0 }, 5*time.Second, 10*time.Millisecond)
	keepReserving(t, s, 1200*time.Millisecond)
	assert.Equal(t, 1, lines.count(unavailable, `"cause"="scripting refused"`), "%s", &lines)
	assert.Equal(t, 1, lines.count(unavailable), "%s", &lines)
	assert.True(t, s.Down())
}

func TestCause(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{err: nil, want: ""},
		{err: errors.New("WRONGPASS invalid username-password pair or user is disabled."), want: "authentication failed"},
		{err: errors.New("NOAUTH Authentication required."), want: "authentication failed"},
		{err: errors.New("NOPERM this user has no permissions to run the 'evalsha' command"), want: "scripting refused"},
		{err: errors.New("ERR unknown command 'EVALSHA', with args beginning with: "), want: "scripting refused"},
		{err: errors.New("NOPERM this user has no permissions to access one of the keys used as arguments"), want: "error"},
		{err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, want: "unreachable"},
		{err: fmt.Errorf("call: %w", context.DeadlineExceeded), want: "unreachable"},
		{err: errors.New("OOM command not allowed when used memory > 'maxmemory'."), want: "error"},
	}
	for _, tt := range tests {
		got := redisstore.Cause(tt.err)
		assert.Equal(t, tt.want, got, "%v", tt.err)
	}
}
