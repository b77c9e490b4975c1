package errors_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

func TestRateLimitExceededRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		wait time.Duration
		want int
	}{
		{-time.Second, 1},
		{0, 1},
		{time.Nanosecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{2500 * time.Millisecond, 3},
		{time.Minute, 60},
	}
	for _, tt := range tests {
		e := &rlerrors.RateLimitExceededError{Wait: tt.wait}
		assert.Equal(t, tt.want, e.RetryAfterSeconds(), "wait %v", tt.wait)
		assert.GreaterOrEqual(t, e.RetryAfter(), time.Duration(0))
	}
}

func TestRateLimitExceededIsTooManyRequests(t *testing.T) {
	e := &rlerrors.RateLimitExceededError{Cluster: "prod", Key: "k8s:default:api.example.com", Wait: 2500 * time.Millisecond, MaxWait: time.Second}

	// As client-go returns it: wrapped in a *url.Error, then wrapped again.
	wrapped := fmt.Errorf("list pods: %w", &url.Error{Op: "Get", URL: "https://api.example.com/api/v1/pods", Err: e})

	assert.True(t, apierrors.IsTooManyRequests(wrapped))
	secs, ok := apierrors.SuggestsClientDelay(wrapped)
	assert.True(t, ok)
	assert.Equal(t, 3, secs)
	assert.Equal(t, metav1.StatusReasonTooManyRequests, apierrors.ReasonForError(wrapped))

	var got *rlerrors.RateLimitExceededError
	require.ErrorAs(t, wrapped, &got)
	assert.Equal(t, "prod", got.Cluster)
	assert.Equal(t, "k8s:default:api.example.com", got.Key)

	var hra rlerrors.HasRetryAfter
	require.ErrorAs(t, wrapped, &hra)
	assert.Equal(t, 2500*time.Millisecond, hra.RetryAfter())

	assert.False(t, errors.Is(wrapped, context.DeadlineExceeded))
}

func TestRateLimitExceededStatus(t *testing.T) {
	e := &rlerrors.RateLimitExceededError{Cluster: "prod", Key: "k8s:default:api.example.com", Wait: 1200 * time.Millisecond, MaxWait: time.Second}
	s := e.Status()
	assert.Equal(t, metav1.StatusFailure, s.Status)
	assert.Equal(t, int32(429), s.Code)
	assert.Equal(t, metav1.StatusReasonTooManyRequests, s.Reason)
	require.NotNil(t, s.Details)
	assert.Equal(t, int32(2), s.Details.RetryAfterSeconds)
	assert.Equal(t, e.Error(), s.Message)
}

func TestRateLimitExceededDeadline(t *testing.T) {
	e := &rlerrors.RateLimitExceededError{Cluster: "prod", Key: "k8s:default:api.example.com", Wait: 5 * time.Second, Err: context.DeadlineExceeded}
	wrapped := &url.Error{Op: "Get", URL: "https://api.example.com/api", Err: e}

	assert.True(t, errors.Is(wrapped, context.DeadlineExceeded))
	assert.False(t, errors.Is(wrapped, context.Canceled))
	assert.True(t, apierrors.IsTooManyRequests(wrapped))
	assert.Contains(t, e.Error(), "deadline")
}

func TestRateLimitExceededError(t *testing.T) {
	tests := []struct {
		err  *rlerrors.RateLimitExceededError
		want string
	}{
		{&rlerrors.RateLimitExceededError{Cluster: "prod", Key: "k8s:default:api.example.com", Wait: 2500 * time.Millisecond, MaxWait: time.Second},
			`client-side rate limit exceeded for cluster "prod" (budget k8s:default:api.example.com): next slot in 2.5s, longer than the maximum wait of 1s`},
		// Unnamed, the cluster is the key's API server: named once.
		{&rlerrors.RateLimitExceededError{Cluster: "api.example.com", Key: "k8s:ops:api.example.com", Wait: 3 * time.Second, Err: context.DeadlineExceeded},
			`client-side rate limit exceeded (budget k8s:ops:api.example.com): next slot in 3s, after the context's deadline: context deadline exceeded`},
		{&rlerrors.RateLimitExceededError{Wait: time.Second},
			`client-side rate limit exceeded: next slot in 1s, longer than the maximum wait of 0s`},
		// Refused by the store within every limit: no maximum wait is named.
		{&rlerrors.RateLimitExceededError{Key: "k8s:default:api.example.com", Wait: 3 * time.Second, ByStore: true},
			`client-side rate limit exceeded (budget k8s:default:api.example.com): next slot in 3s, refused by the budget's store`},
		// Waits as the engine computes them, rounded as a person reads them.
		{&rlerrors.RateLimitExceededError{Cluster: "prod", Key: "k8s:ops:api.example.com", Wait: 997920626 * time.Nanosecond, MaxWait: 250 * time.Millisecond},
			`client-side rate limit exceeded for cluster "prod" (budget k8s:ops:api.example.com): next slot in 998ms, longer than the maximum wait of 250ms`},
		{&rlerrors.RateLimitExceededError{Key: "k8s:ops:api.example.com", Wait: 150*time.Second + 12*time.Millisecond, MaxWait: time.Minute},
			`client-side rate limit exceeded (budget k8s:ops:api.example.com): next slot in 2m30s, longer than the maximum wait of 1m`},
		// What the request would have waited for.
		{&rlerrors.RateLimitExceededError{Key: "k8s:ops:api.example.com", Wait: 101 * time.Millisecond, WaitingFor: rlerrors.WaitingForSeat},
			`client-side rate limit exceeded (budget k8s:ops:api.example.com): next slot in 101ms (waiting for a seat), longer than the maximum wait of 0s`},
		{&rlerrors.RateLimitExceededError{Key: "k8s:ops:api.example.com", Wait: 30 * time.Second, MaxWait: time.Second, WaitingFor: rlerrors.WaitingForCooldown},
			`client-side rate limit exceeded (budget k8s:ops:api.example.com): next slot in 30s (cooling down after the server's 429), longer than the maximum wait of 1s`},
		{&rlerrors.RateLimitExceededError{Key: "k8s:ops:api.example.com", Wait: time.Minute, Err: context.DeadlineExceeded, WaitingFor: rlerrors.WaitingForRateSlot},
			`client-side rate limit exceeded (budget k8s:ops:api.example.com): next slot in 1m (waiting for a rate slot), after the context's deadline: context deadline exceeded`},
		// The request's traffic class.
		{&rlerrors.RateLimitExceededError{Key: "k8s:ops:api.example.com", Wait: 10 * time.Second, MaxWait: time.Second, WaitingFor: rlerrors.WaitingForRateSlot, Class: "event"},
			`client-side rate limit exceeded (budget k8s:ops:api.example.com): next event slot in 10s (waiting for a rate slot), longer than the maximum wait of 1s`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
	}
}

func TestInvalidConfigurationError(t *testing.T) {
	tests := []struct {
		err  *rlerrors.InvalidConfigurationError
		want string
	}{
		{&rlerrors.InvalidConfigurationError{Key: "KUBERNETES_RATELIMIT_TIMESPAN", Value: "week", Reason: "one of second, minute, hour, day (any case)"},
			`invalid configuration: KUBERNETES_RATELIMIT_TIMESPAN="week": one of second, minute, hour, day (any case)`},
		{&rlerrors.InvalidConfigurationError{Key: "KUBERNETES_RATELIMIT_REDIS_URL", Reason: "required"},
			`invalid configuration: KUBERNETES_RATELIMIT_REDIS_URL: required`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
		var ice *rlerrors.InvalidConfigurationError
		assert.True(t, errors.As(fmt.Errorf("setup: %w", tt.err), &ice))
	}
}

func TestErrClosed(t *testing.T) {
	err := &url.Error{Op: "Get", URL: "https://api.example.com/api", Err: fmt.Errorf("budget: %w", rlerrors.ErrClosed)}
	assert.True(t, errors.Is(err, rlerrors.ErrClosed))
}
