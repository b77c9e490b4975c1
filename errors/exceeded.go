package errors

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RateLimitExceededError reports that a request was not sent because its
// slot in the budget was further away than the caller was willing to wait.
// Nothing was reserved and nothing was sent.
//
// It is an apimachinery APIStatus with code 429 and reason TooManyRequests,
// so apierrors.IsTooManyRequests and apierrors.SuggestsClientDelay hold for
// it (also when wrapped), and code that already handles an API server's 429
// handles it too. When the context's deadline came before the slot, Err is
// context.DeadlineExceeded and errors.Is(err, context.DeadlineExceeded)
// holds.
type RateLimitExceededError struct {
	// Cluster is the registered name of the cluster, or the normalised API
	// server (see package cluster) for clients configured without a name.
	Cluster string
	// Key is the budget key, k8s:<owner>:<apiserver>.
	Key string
	// Wait is how long from the moment of the decision until the request
	// could have been sent. RetryAfter returns it.
	Wait time.Duration
	// MaxWait is the maximum wait that applied to the request. It is only
	// meaningful when Err is nil.
	MaxWait time.Duration
	// Err is the reason the request could not wait, when it is not the
	// maximum wait: context.DeadlineExceeded when the context's deadline
	// came before the slot. It is nil when Wait exceeded MaxWait.
	Err error
}

var (
	_ error               = (*RateLimitExceededError)(nil)
	_ HasRetryAfter       = (*RateLimitExceededError)(nil)
	_ apierrors.APIStatus = (*RateLimitExceededError)(nil)
)

// Error describes the budget, the wait and why the request could not wait.
func (e *RateLimitExceededError) Error() string {
	var b strings.Builder
	b.WriteString("client-side rate limit exceeded")
	if e.Cluster != "" {
		fmt.Fprintf(&b, " for cluster %q", e.Cluster)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, " (budget %s)", e.Key)
	}
	fmt.Fprintf(&b, ": next slot in %s", e.RetryAfter())
	if e.Err != nil {
		fmt.Fprintf(&b, ", after the context's deadline: %v", e.Err)
	} else {
		fmt.Fprintf(&b, ", longer than the maximum wait of %s", e.MaxWait)
	}
	return b.String()
}

// Unwrap returns Err, so that errors.Is(err, context.DeadlineExceeded)
// holds when the context's deadline came before the slot.
func (e *RateLimitExceededError) Unwrap() error { return e.Err }

// RetryAfter returns how long to wait before trying again: the time until
// the request's slot, never negative.
func (e *RateLimitExceededError) RetryAfter() time.Duration {
	return max(e.Wait, 0)
}

// RetryAfterSeconds returns RetryAfter in whole seconds, rounded up and at
// least 1, as an HTTP Retry-After header or a Status carries it.
func (e *RateLimitExceededError) RetryAfterSeconds() int {
	s := math.Ceil(e.RetryAfter().Seconds())
	switch {
	case s < 1:
		return 1
	case s > math.MaxInt32:
		return math.MaxInt32
	}
	return int(s)
}

// Status returns the error as an API status: code 429, reason
// TooManyRequests, with Details.RetryAfterSeconds set.
func (e *RateLimitExceededError) Status() metav1.Status {
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusTooManyRequests,
		Reason:  metav1.StatusReasonTooManyRequests,
		Message: e.Error(),
		Details: &metav1.StatusDetails{
			RetryAfterSeconds: int32(e.RetryAfterSeconds()),
		},
	}
}
