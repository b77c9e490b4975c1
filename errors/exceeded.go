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
	// ByStore reports that the budget's store refused the request by
	// itself, within the request's maximum wait and deadline: a scripted
	// refusal of package fake. MaxWait is then meaningless and Err is nil.
	ByStore bool
	// WaitingFor is what the request would have waited for: a rate slot,
	// the end of a server's cooldown, or a seat. Empty when not known.
	WaitingFor WaitingFor
	// Class is the request's traffic class (write, read, list or event),
	// as the budget shares its slots among them. Empty when not known.
	Class string
}

// WaitingFor names what a request waits for before it is sent. The zero
// value names nothing.
type WaitingFor string

const (
	// WaitingForRateSlot: its slot in the rate budget (the window or the
	// linear pacing) is further away.
	WaitingForRateSlot WaitingFor = "rate slot"
	// WaitingForCooldown: the budget cools down after the API server's
	// throttling answer (429, or 503 with Retry-After).
	WaitingForCooldown WaitingFor = "cooldown"
	// WaitingForSeat: every seat of the concurrency limit is held.
	WaitingForSeat WaitingFor = "seat"
)

// phrase returns how an error message names w, "" for none.
func (w WaitingFor) phrase() string {
	switch w {
	case WaitingForRateSlot:
		return "waiting for a rate slot"
	case WaitingForCooldown:
		return "cooling down after the server's 429"
	case WaitingForSeat:
		return "waiting for a seat"
	}
	return ""
}

var (
	_ error               = (*RateLimitExceededError)(nil)
	_ HasRetryAfter       = (*RateLimitExceededError)(nil)
	_ apierrors.APIStatus = (*RateLimitExceededError)(nil)
)

// Error describes the budget, the wait and why the request could not wait:
// the maximum wait is named only when it was the reason.
// The API server is named once: the cluster is left out when it is the
// budget key's own API server (a client configured without a cluster
// name). Durations are rounded as a person reads them (see readable).
func (e *RateLimitExceededError) Error() string {
	var b strings.Builder
	b.WriteString("client-side rate limit exceeded")
	if e.Cluster != "" && e.Cluster != apiServerOf(e.Key) {
		fmt.Fprintf(&b, " for cluster %q", e.Cluster)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, " (budget %s)", e.Key)
	}
	if e.Class != "" {
		fmt.Fprintf(&b, ": next %s slot in %s", e.Class, readable(e.RetryAfter()))
	} else {
		fmt.Fprintf(&b, ": next slot in %s", readable(e.RetryAfter()))
	}
	if p := e.WaitingFor.phrase(); p != "" {
		fmt.Fprintf(&b, " (%s)", p)
	}
	switch {
	case e.Err != nil:
		fmt.Fprintf(&b, ", after the context's deadline: %v", e.Err)
	case e.ByStore:
		b.WriteString(", refused by the budget's store")
	default:
		fmt.Fprintf(&b, ", longer than the maximum wait of %s", readable(e.MaxWait))
	}
	return b.String()
}

// apiServerOf returns the <apiserver> part of a budget key
// k8s:<owner>:<apiserver> (an owner holds no colon), or "".
func apiServerOf(key string) string {
	rest, ok := strings.CutPrefix(key, "k8s:")
	if !ok {
		return ""
	}
	_, apiserver, _ := strings.Cut(rest, ":")
	return apiserver
}

// readable rounds d to what a person reads: below a second to the
// millisecond (998ms), below a minute to a tenth of a second (2.5s),
// otherwise to the second (2m30s), with trailing zero units dropped (2m,
// 1h). A positive d never reads as 0s: it is at least 1ms.
func readable(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if r := max(d.Round(time.Millisecond), time.Millisecond); r < time.Second {
		return r.String()
	}
	if r := d.Round(100 * time.Millisecond); r < time.Minute {
		return r.String()
	}
	s := d.Round(time.Second).String() // 2m30s, 2m0s, 1h0m0s
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
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
