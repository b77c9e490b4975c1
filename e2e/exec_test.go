package e2e_test

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/probe"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// execPromptly bounds how long an exec may take to be answered: far less
// than the hour the exhausted budget's next slot is away.
const execPromptly = 10 * time.Second

// unscheduledExecError is what the API server answers an exec into a pod
// no node runs.
const unscheduledExecError = "does not have a host assigned"

// TestExecNotDelayedByExhaustedBudget exhausts a budget of one request an
// hour, then execs into a pod through it, over SPDY and over WebSocket. No
// node runs the pod, so the API server answers an error; what matters is
// that the request reached it at once, without counting.
func TestExecNotDelayedByExhaustedBudget(t *testing.T) {
	ns := newNamespace(t)
	pod := createUnscheduledPod(t, ns)

	executors := map[string]func(rc *rest.Config, u *url.URL) (remotecommand.Executor, error){
		"spdy": func(rc *rest.Config, u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(rc, "POST", u)
		},
		"websocket": func(rc *rest.Config, u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(rc, "GET", u.String())
		},
	}
	for name, newExecutor := range executors {
		t.Run(name, func(t *testing.T) {
			var decisions probe.Decisions
			cfg := k8sratelimit.DefaultConfig()
			cfg.Limit, cfg.Timespan = 1, time.Hour
			l, err := k8sratelimit.New(cfg, k8sratelimit.WithObserver(&decisions))
			require.NoError(t, err)
			t.Cleanup(func() { l.Close() })

			rc := userConfig(userPlain)
			var wire probe.Wire
			rc.Wrap(wire.Wrap)
			require.NoError(t, l.Configure(rc))
			cs, err := kubernetes.NewForConfig(rc)
			require.NoError(t, err)

			exhaustBudget(t, cs, ns, pod)
			sent := wire.Len()

			u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
				VersionedParams(&corev1.PodExecOptions{Command: []string{"true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec).
				URL()
			executor, err := newExecutor(rc, u)
			require.NoError(t, err)
			ctx := withTimeout(t, execPromptly)
			var out bytes.Buffer
			start := time.Now()
			err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
			elapsed := time.Since(start)

			t.Logf("exec answered in %s: %v", elapsed.Round(time.Millisecond), err)
			require.Error(t, err, "no node runs the pod")
			assert.NotErrorAs(t, err, new(*rlerrors.RateLimitExceededError))
			assert.NoError(t, ctx.Err(), "the exec was delayed")
			assert.Less(t, elapsed, execPromptly)
			execs := wire.Exchanges()[sent:]
			require.NotEmpty(t, execs, "the exec request did not leave the client")
			for _, e := range execs {
				assert.True(t, strings.HasSuffix(e.Path, "/exec"), "only the exec was sent: %s %s", e.Method, e.Path)
			}
			assert.ErrorContains(t, err, unscheduledExecError, "the API server answered the exec")
			counts := decisions.Total()
			assert.Equal(t, 1, counts.Admitted, "the exec is not counted")
			assert.Equal(t, len(execs), counts.Exempt, "the exec passes as exempt")
		})
	}
}

// createUnscheduledPod creates a pod in ns that no node will run, with
// the admin client, and returns its name.
func createUnscheduledPod(t *testing.T, ns string) string {
	t.Helper()
	ctx := t.Context()
	// The ServiceAccount admission plugin wants the pod's service account
	// to exist; nothing else creates it here.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	_, err := suite.admin.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "target"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	_, err = suite.admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return pod.Name
}

// exhaustBudget spends the budget's one request, then checks that the
// next counted request would have to wait about an hour.
func exhaustBudget(t *testing.T, cs kubernetes.Interface, ns, pod string) {
	t.Helper()
	_, err := cs.CoreV1().Pods(ns).Get(t.Context(), pod, metav1.GetOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Pods(ns).Get(k8sratelimit.WithMaxWait(t.Context(), 0), pod, metav1.GetOptions{})
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle, "the budget should be spent")
	require.Greater(t, rle.RetryAfter(), 59*time.Minute)
}
