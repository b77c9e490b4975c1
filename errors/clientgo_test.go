package errors_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// failingTransport fails every request with err, as a limiter's transport
// does when a request cannot wait for its slot.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// The errors survive client-go's wrapping: errors.As on the error that a
// typed clientset call returns finds them.
func TestErrorsSurviveClientGo(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()

	tests := []struct {
		name string
		err  error
	}{
		{"max wait", &rlerrors.RateLimitExceededError{Cluster: "test", Key: "k8s:default:x", Wait: 2 * time.Second, MaxWait: time.Second}},
		{"deadline", &rlerrors.RateLimitExceededError{Cluster: "test", Key: "k8s:default:x", Wait: 2 * time.Second, Err: context.DeadlineExceeded}},
		{"closed", rlerrors.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &rest.Config{Host: srv.URL}
			rc.Wrap(func(http.RoundTripper) http.RoundTripper { return failingTransport{tt.err} })
			cs, err := kubernetes.NewForConfig(rc)
			require.NoError(t, err)

			_, err = cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
			require.Error(t, err)
			assert.True(t, errors.Is(err, tt.err), "errors.Is(%v, %v)", err, tt.err)

			var rle *rlerrors.RateLimitExceededError
			if errors.As(tt.err, &rle) {
				var got *rlerrors.RateLimitExceededError
				require.ErrorAs(t, err, &got)
				assert.Equal(t, "test", got.Cluster)
				assert.True(t, apierrors.IsTooManyRequests(err))
				secs, ok := apierrors.SuggestsClientDelay(err)
				assert.True(t, ok)
				assert.Equal(t, 2, secs)
				assert.Equal(t, errors.Is(tt.err, context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded))
			}
		})
	}
	assert.Zero(t, hits.Load(), "no request reached the server")
}
