package fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/fake"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
)

func clientFor(t *testing.T, f *fake.Recorder, host string) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	rc := &rest.Config{Host: host}
	require.NoError(t, f.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs, rc
}

func TestFakeRecordsPerKeyAndNeverWaits(t *testing.T) {
	srv := apisim.New()
	defer srv.Close()
	f := fake.New()
	cs, rc := clientFor(t, f, srv.URL)
	ctx := context.Background()

	for range 1000 { // far more than the default 400 per minute
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
	}
	_, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "leader", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().List(k8sratelimit.WithoutLimit(ctx), metav1.ListOptions{})
	require.NoError(t, err)

	assert.Equal(t, 1000, f.Requests(f.Key(rc)))
	assert.Equal(t, map[string]int{f.Key(rc): 1000}, f.Counts())
	assert.Equal(t, 2, f.Exempt(), "the lease and the WithoutLimit request")
	assert.Equal(t, 1002, len(srv.Requests()))

	f.Reset()
	assert.Zero(t, f.Requests(f.Key(rc)))
	assert.Zero(t, f.Exempt())
}

func TestFakeRejectNext(t *testing.T) {
	srv := apisim.New()
	defer srv.Close()
	f := fake.New()
	cs, rc := clientFor(t, f, srv.URL)
	ctx := context.Background()

	f.RejectNext(2, 3*time.Second)
	for range 2 {
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		var rle *rlerrors.RateLimitExceededError
		require.ErrorAs(t, err, &rle)
		assert.Equal(t, 3*time.Second, rle.RetryAfter())
		assert.Equal(t, f.Key(rc), rle.Key)
		assert.True(t, apierrors.IsTooManyRequests(err))
	}
	_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "only the next two are refused")
	assert.Equal(t, 1, srv.Count("/pods"), "refused requests never reach the server")
	assert.Equal(t, 3, f.Requests(f.Key(rc)), "refused requests are recorded too")
}

func TestFakeRejectAll(t *testing.T) {
	srv := apisim.New()
	defer srv.Close()
	f := fake.New()
	cs, _ := clientFor(t, f, srv.URL)
	ctx := context.Background()

	f.RejectAll(time.Minute)
	for range 5 {
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		var ra rlerrors.HasRetryAfter
		require.ErrorAs(t, err, &ra)
		assert.Equal(t, time.Minute, ra.RetryAfter())
	}
	// Exempt requests still pass.
	_, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "leader", metav1.GetOptions{})
	assert.NoError(t, err)

	f.Reset()
	_, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	assert.NoError(t, err)
}

// A scripted refusal names a maximum wait only when the caller set one,
// and then the true one.
func TestFakeRefusalNamesOnlyAMaxWaitThatWasSet(t *testing.T) {
	srv := apisim.New()
	defer srv.Close()
	f := fake.New()
	cs, _ := clientFor(t, f, srv.URL)

	list := func(ctx context.Context) string {
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		var rle *rlerrors.RateLimitExceededError
		require.ErrorAs(t, err, &rle)
		assert.Equal(t, 3*time.Second, rle.RetryAfter())
		return rle.Error()
	}
	f.RejectAll(3 * time.Second)
	msg := list(context.Background())
	assert.NotContains(t, msg, "maximum wait", "no max wait was set")
	assert.Contains(t, msg, "next list slot in 3s")

	msg = list(k8sratelimit.WithMaxWait(context.Background(), 10*time.Second))
	assert.NotContains(t, msg, "maximum wait", "3s is within the max wait of 10s: it is not the reason")

	msg = list(k8sratelimit.WithMaxWait(context.Background(), time.Second))
	assert.Contains(t, msg, "longer than the maximum wait of 1s")
}

func TestFakeInstallAsDefault(t *testing.T) {
	srv := apisim.New()
	defer srv.Close()
	f := fake.New()
	restore := f.Install()
	defer restore()

	got, err := k8sratelimit.Default()
	require.NoError(t, err)
	assert.Same(t, f.Limiter, got)

	rc := &rest.Config{Host: srv.URL}
	require.NoError(t, k8sratelimit.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	f.RejectNext(1, time.Second)
	_, err = cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	assert.True(t, errors.As(err, new(*rlerrors.RateLimitExceededError)))
	assert.Equal(t, 1, f.Requests(f.Key(rc)))
}
