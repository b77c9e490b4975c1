package k8sratelimit_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureKlog sends klog's output to a buffer until the test ends: its
// INFO log, which holds every line once, whatever its severity.
func captureKlog(t *testing.T) *syncBuffer {
	t.Helper()
	var buf syncBuffer
	klog.LogToStderr(false)
	klog.SetOutputBySeverity("INFO", &buf)
	t.Cleanup(func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	return &buf
}

// On the one-line path (Configure, the process default limiter, no logger
// anywhere), a Redis store with a wrong password is reported through klog,
// once, as an authentication failure with its URL redacted; the requests
// still go, decided per process by the default failure policy.
func TestConfigureReportsAnUnusableRedisThroughKlog(t *testing.T) {
	srv := redistest.Start(t)
	require.NoError(t, srv.Client().ConfigSet(context.Background(), "requirepass", "right-one").Err())
	api := apisim.New()
	t.Cleanup(api.Close)
	out := captureKlog(t)
	t.Setenv("KUBERNETES_RATELIMIT_STORE", "redis")
	t.Setenv("KUBERNETES_RATELIMIT_OWNER", "ops")
	t.Setenv("KUBERNETES_RATELIMIT_REDIS_URL", "redis://:wrong-one@"+srv.Addr()+"/0")
	k8sratelimit.SetDefault(nil)
	t.Cleanup(func() {
		if l, err := k8sratelimit.Default(); err == nil {
			_ = l.Close()
		}
		k8sratelimit.SetDefault(nil)
	})

	rc := &rest.Config{Host: api.URL}
	require.NoError(t, k8sratelimit.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	for range 5 {
		_, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err, "the local failure policy admits")
	}
	require.Eventually(t, func() bool { klog.Flush(); return strings.Contains(out.String(), "Redis store unavailable") },
		5*time.Second, 10*time.Millisecond)
	klog.Flush()
	log := out.String()
	assert.Equal(t, 1, strings.Count(log, "Redis store unavailable"), log)
	assert.Contains(t, log, `cause="authentication failed"`)
	assert.Contains(t, log, `redis="redis://:xxxxx@`+srv.Addr()+`/0"`)
	assert.NotContains(t, log, "wrong-one", "the password is never printed")
	assert.Equal(t, 5, api.Count("/api/v1/namespaces/default/pods"))
}
