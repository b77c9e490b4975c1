package e2e_test

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/probe"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// The max-wait test's settings.
const (
	// escalatedRetryAfter is the Retry-After (seconds) the priority level
	// is driven up to first, so that the cooldown it starts cannot be
	// mistaken for the 1 s the limiter assumes without one.
	escalatedRetryAfter = 4
	// escalateTimeout bounds driving it there.
	escalateTimeout = time.Minute
	// shortMaxWait is the limiter's maximum wait: below any cooldown.
	shortMaxWait = 500 * time.Millisecond
	// retryAfterTolerance is how far the error's RetryAfter may be from
	// the cooldown the server's Retry-After started: the time between the
	// answer reaching the limiter and being recorded below it.
	retryAfterTolerance = 250 * time.Millisecond
)

// TestMaxWaitUnderServerCooldown drives the limiter into a cooldown set
// by a real 429 and checks that a request that would have to wait longer
// than the maximum wait fails at once with a RateLimitExceededError whose
// RetryAfter is the cooldown the server's Retry-After asked for.
func TestMaxWaitUnderServerCooldown(t *testing.T) {
	escalateRetryAfter(t, userMaxWait, escalatedRetryAfter)

	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan = 10000, time.Second // the budget itself never makes anyone wait
	maxWait := shortMaxWait
	cfg.MaxWait = &maxWait
	l, err := k8sratelimit.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })

	rc := userConfig(userMaxWait)
	var wire probe.Wire
	rc.Wrap(wire.Wrap)
	require.NoError(t, l.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	// Every worker sends until the limiter refuses it: the first 429 starts
	// a cooldown longer than the maximum wait.
	ctx := withTimeout(t, time.Minute)
	var wg sync.WaitGroup
	for range loadWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := getOnce(cs)(ctx); errors.As(err, new(*rlerrors.RateLimitExceededError)) {
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, ctx.Err())

	cooldownEnd, retryAfter := serverCooldown(t, wire.Exchanges())
	sent := wire.Len()
	start := time.Now()
	err = getOnce(cs)(ctx)
	elapsed := time.Since(start)
	expected := cooldownEnd.Sub(start)

	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	t.Logf("server Retry-After %ds; cooldown left %s; error: %v", retryAfter, expected.Round(time.Millisecond), rle)
	assert.InDelta(t, float64(expected), float64(rle.RetryAfter()), float64(retryAfterTolerance),
		"RetryAfter %s, expected the %s left of the server's cooldown", rle.RetryAfter(), expected)
	assert.LessOrEqual(t, rle.RetryAfter(), time.Duration(retryAfter)*time.Second+retryAfterTolerance)
	assert.Greater(t, rle.RetryAfter(), shortMaxWait)
	assert.True(t, apierrors.IsTooManyRequests(err))
	assert.Less(t, elapsed, shortMaxWait, "refused at once, not after waiting")
	assert.Equal(t, sent, wire.Len(), "a refused request is not sent")
}

// escalateRetryAfter drives user's rejecting priority level with
// unthrottled workers until APF answers a 429 with a Retry-After of at
// least seconds: APF doubles it while a level keeps rejecting.
func escalateRetryAfter(t *testing.T, user string, seconds int) {
	t.Helper()
	rc := userConfig(user)
	var wire probe.Wire
	rc.Wrap(wire.Wrap)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	// Workers stop sending once the Retry-After is reached; requests in
	// flight are left to finish.
	ctx := withTimeout(t, escalateTimeout)
	var (
		wg      sync.WaitGroup
		done    atomic.Bool
		reached = make(chan int, 1)
	)
	for range loadWorkers {
		wg.Go(func() {
			for !done.Load() && ctx.Err() == nil {
				err := getOnce(cs)(ctx)
				var status apierrors.APIStatus
				if !errors.As(err, &status) || status.Status().Code != http.StatusTooManyRequests {
					continue
				}
				if d, ok := apierrors.SuggestsClientDelay(err); ok && d >= seconds {
					select {
					case reached <- d:
					default:
					}
					done.Store(true)
				}
			}
		})
	}
	wg.Wait()
	select {
	case d := <-reached:
		t.Logf("APF answered Retry-After: %d after %d requests (%s)", d, wire.Len(), countsString(probe.Summarize(wire.Exchanges()).RetryAfters))
	default:
		t.Fatalf("APF did not raise Retry-After to %ds within %s: %s", seconds, escalateTimeout,
			countsString(probe.Summarize(wire.Exchanges()).RetryAfters))
	}
}

// serverCooldown returns when the cooldown the 429s among exchanges
// started ends — each starts when its answer came and lasts its
// Retry-After, and a cooldown only extends — and the Retry-After of the
// 429 that set that end.
func serverCooldown(t *testing.T, exchanges []probe.Exchange) (end time.Time, retryAfter int) {
	t.Helper()
	for _, e := range exchanges {
		if e.Status != http.StatusTooManyRequests {
			continue
		}
		s, ok := e.RetryAfterSeconds()
		require.True(t, ok, "a 429 without delta-seconds Retry-After: %q", e.RetryAfter)
		if until := e.Answered.Add(time.Duration(s) * time.Second); until.After(end) {
			end, retryAfter = until, s
		}
	}
	require.False(t, end.IsZero(), "the API server answered no 429")
	return end, retryAfter
}
