package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/probe"
	"github.com/k8sratelimit/k8sratelimit/internal/decided"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// The load both runs make: loadWorkers concurrent workers, each making
// loadCalls calls.
const (
	loadWorkers = 50
	loadCalls   = 6
)

// budgetSpan is the timespan of the budget sized to the priority level: a
// read of probePath is served well within it, so a budget of one request
// per seat per budgetSpan keeps the level's seats from overflowing.
const budgetSpan = 100 * time.Millisecond

// runFigures are what a run under load measured.
type runFigures struct {
	calls, failed int
	probe.Summary
	maxInWindow int // most sends in any rolling budgetSpan
}

// TestAPFThrottlingWithAndWithoutLimiter drives the same load at a user
// whose priority level rejects readily, first without client-side
// limiting, then through the limiter with a budget sized to the level, and
// compares the 429s the API server answered.
func TestAPFThrottlingWithAndWithoutLimiter(t *testing.T) {
	var without, with runFigures
	t.Run("without limiter", func(t *testing.T) { without = runWithoutLimiter(t) })
	t.Run("with limiter", func(t *testing.T) { with = runWithLimiter(t) })
	t.Log("\n" + figuresTable(without, with))

	require.Positive(t, with.calls, "the run with the limiter did not complete")
	assert.LessOrEqual(t, with.Throttled*10, without.Throttled,
		"the limiter should cut the 429s by at least 90%%: %d without, %d with", without.Throttled, with.Throttled)
}

// runWithoutLimiter sends the load with no client-side limiting and no
// retries, and checks that the API server throttles it.
func runWithoutLimiter(t *testing.T) runFigures {
	th := suite.throttles[userUnlimited]
	rc := userConfig(userUnlimited)
	var wire probe.Wire
	rc.Wrap(wire.Wrap)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	errs := runLoad(t.Context(), loadWorkers, loadCalls, getOnce(cs))
	for _, err := range errs {
		require.True(t, apierrors.IsTooManyRequests(err), "a call failed otherwise than with a 429: %v", err)
	}
	f := figures(wire.Exchanges(), loadWorkers*loadCalls, len(errs))
	logThrottling(t, f.Summary)

	assert.GreaterOrEqual(t, f.Throttled, loadWorkers, "50 unthrottled workers should draw many 429s")
	assert.Equal(t, f.Throttled, len(errs), "every 429 on the wire is a failed call")
	for ra := range f.RetryAfters {
		_, err := strconv.Atoi(ra)
		assert.NoError(t, err, "a 429 with Retry-After %q, not delta-seconds", ra)
	}
	assert.Equal(t, map[string]int{string(th.PriorityLevel.UID): f.Sent}, f.PriorityLvls,
		"every answer comes from the test priority level")
	return f
}

// runWithLimiter sends the same load through the limiter, with client-go
// retrying 429s as it does by default, and checks that every call is
// served and that no rolling window lets more than the budget go. The
// window is checked on the store's decisions, timed around the calls that
// made them (package decided): a request leaves a moment after its
// decision, and on a loaded machine with the race detector (two cores
// running etcd, kube-apiserver and the test) a goroutine was seen to wait
// 16 ms between the two, so sends can only be checked with a tolerance
// that lets a limiter a third over budget pass.
func runWithLimiter(t *testing.T) runFigures {
	th := suite.throttles[userLimited]
	seats, err := th.NominalSeats(t.Context(), suite.admin)
	require.NoError(t, err)
	require.Positive(t, seats)

	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan = seats, budgetSpan
	var decisions probe.Decisions
	deciding := probe.NewDecisionStore(memorystore.New(clock.RealClock{}))
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithObserver(&decisions), k8sratelimit.WithStore(deciding))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })

	rc := userConfig(userLimited)
	var wire probe.Wire
	rc.Wrap(wire.Wrap) // below the limiter: sees what actually leaves
	require.NoError(t, l.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	errs := runLoad(t.Context(), loadWorkers, loadCalls, getRetrying(cs))
	require.Empty(t, errs, "every call should be served in the end")

	exchanges := wire.Exchanges()
	f := figures(exchanges, loadWorkers*loadCalls, len(errs))
	t.Logf("budget: %d requests per %s (the priority level has %d seats)", cfg.Limit, cfg.Timespan, seats)
	logThrottling(t, f.Summary)

	spans := deciding.Spans()
	require.Len(t, spans, f.Sent, "every request sent, retries included, is let go by one store decision")
	crowd := logShortestSpans(t, cfg.Limit+1, probe.SendTimes(exchanges), decisions.AdmitTimes(), spans)
	if !assert.GreaterOrEqual(t, crowd.Within, cfg.Timespan, "the limiter let %d requests go within %s: %v", cfg.Limit+1, cfg.Timespan, crowd) {
		logExchangesAround(t, exchanges, crowd.Spans[0].From, 2*cfg.Timespan)
	}
	counts := decisions.Total()
	assert.Equal(t, f.Sent, counts.Admitted, "every request sent, retries included, is admitted by the limiter once")
	assert.Equal(t, f.Throttled, counts.Throttled, "the limiter sees every 429")
	assert.Zero(t, counts.Rejected)
	return f
}

// logShortestSpans logs the shortest time in which n requests were told
// to go by the store (surely: from the decisions' spans), were admitted (as
// the limiter's observer saw it) and left (as seen below the limiter): how
// close a window came to holding n, at each step from the decision to the
// wire. It returns the n decisions that came closest.
func logShortestSpans(t *testing.T, n int, sends, admits []time.Time, spans []decided.Span) decided.Crowd {
	t.Helper()
	crowd, _ := decided.Tightest(spans, n)
	admitted, _ := probe.ShortestSpan(admits, n)
	sent, _ := probe.ShortestSpan(sends, n)
	t.Logf("the shortest time in which %d requests (the budget + 1) were decided: %s (the widest decision span %s), admitted: %s, sent: %s",
		n, crowd.Within, crowd.Widest(), admitted, sent)
	return crowd
}

// logExchangesAround logs the exchanges sent within d of at.
func logExchangesAround(t *testing.T, exchanges []probe.Exchange, at time.Time, d time.Duration) {
	t.Helper()
	for _, e := range exchanges {
		if e.Sent.After(at.Add(-d)) && e.Sent.Before(at.Add(d)) {
			t.Logf("sent %s (%+8.3fms) answered %s: %d %s", e.Sent.Format(time.StampMicro),
				float64(e.Sent.Sub(at))/float64(time.Millisecond), e.Answered.Format(time.StampMicro), e.Status, e.RetryAfter)
		}
	}
}

// figures condenses a run's exchanges.
func figures(exchanges []probe.Exchange, calls, failed int) runFigures {
	f := runFigures{calls: calls, failed: failed, Summary: probe.Summarize(exchanges)}
	f.maxInWindow, _ = probe.MaxInWindow(probe.SendTimes(exchanges), budgetSpan)
	return f
}

// logThrottling logs the 429s of a run: how many, their Retry-After
// values, and the flow schema and priority level APF named.
func logThrottling(t *testing.T, s probe.Summary) {
	t.Helper()
	t.Logf("sent %d requests in %s, %d answered 429", s.Sent, s.Duration.Round(time.Millisecond), s.Throttled)
	t.Logf("Retry-After values (value: count): %s", countsString(s.RetryAfters))
	t.Logf("X-Kubernetes-PF-FlowSchema-UID (uid: count): %s", countsString(s.FlowSchemas))
	t.Logf("X-Kubernetes-PF-PriorityLevel-UID (uid: count): %s", countsString(s.PriorityLvls))
}

// countsString formats counts by value, sorted.
func countsString(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// figuresTable sets the figures of both runs side by side.
func figuresTable(without, with runFigures) string {
	var b strings.Builder
	row := func(name string, a, b2 any) { fmt.Fprintf(&b, "%-38s %16v %16v\n", name, a, b2) }
	row("", "no limiter", "k8sratelimit")
	row("calls", without.calls, with.calls)
	row("calls failed", without.failed, with.failed)
	row("requests sent (incl. retries)", without.Sent, with.Sent)
	row("429s received", without.Throttled, with.Throttled)
	row("Retry-After values", countsString(without.RetryAfters), countsString(with.RetryAfters))
	row(fmt.Sprintf("most sent in any %s", budgetSpan), without.maxInWindow, with.maxInWindow)
	row("duration", without.Duration.Round(time.Millisecond), with.Duration.Round(time.Millisecond))
	return b.String()
}

// withTimeout returns a context for t that ends after d.
func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
