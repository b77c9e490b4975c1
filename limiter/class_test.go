package limiter_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// classes returns Options with the default class weights.
func classes() limiter.Options {
	w := limiter.DefaultWeights
	return limiter.Options{Classes: &w}
}

// waitAs calls b.Wait on a goroutine for a request of class c, with the
// maximum wait maxWait (0: none).
func waitAs(b *limiter.Budget, c limiter.Class, maxWait time.Duration) <-chan error {
	ctx := limiter.WithClass(context.Background(), c)
	if maxWait > 0 {
		ctx = k8sratelimit.WithMaxWait(ctx, maxWait)
	}
	return harness.Async(func() error { return b.Wait(ctx) })
}

// A write that comes after lists that wait takes the first slot that
// comes; the list whose slot it was takes the write's, later one.
func TestAWriteTakesTheFirstSlotThatComes(t *testing.T) {
	b, clk := setup(t, window(1, time.Second), classes())
	require.NoError(t, b.Wait(context.Background()))
	list1 := waitAs(b, limiter.ClassList, 0) // slot at 1s
	untilWaiting(t, clk, 1)
	list2 := waitAs(b, limiter.ClassList, 0) // slot at 2s
	untilWaiting(t, clk, 2)
	write := waitAs(b, limiter.ClassWrite, 0) // slot at 3s
	untilWaiting(t, clk, 3)

	clk.Step(time.Second)
	require.NoError(t, harness.Result(t, write), "the write goes in the first slot")
	harness.Pending(t, list1)
	harness.Pending(t, list2)
	untilWaiting(t, clk, 2)
	clk.Step(time.Second)
	require.NoError(t, harness.Result(t, list1), "the lists keep their order")
	harness.Pending(t, list2)
	untilWaiting(t, clk, 1)
	clk.Step(time.Second)
	require.NoError(t, harness.Result(t, list2))
}

// A trade never moves a request past the maximum wait it was decided
// with: a list that may wait 1.5s keeps its slot at 1s, however many
// writes wait.
func TestATradeKeepsEveryRequestWithinItsMaxWait(t *testing.T) {
	b, clk := setup(t, window(1, time.Second), classes())
	require.NoError(t, b.Wait(context.Background()))
	list := waitAs(b, limiter.ClassList, 1500*time.Millisecond) // slot at 1s
	untilWaiting(t, clk, 1)
	write := waitAs(b, limiter.ClassWrite, 0) // slot at 2s
	untilWaiting(t, clk, 2)

	clk.Step(time.Second)
	require.NoError(t, harness.Result(t, list), "the list keeps its slot: the write's is beyond its maximum wait")
	harness.Pending(t, write)
	clk.Step(time.Second)
	require.NoError(t, harness.Result(t, write))
}

// Without classes, every request waits in one line.
func TestWithoutClassesOneLine(t *testing.T) {
	b, clk := setup(t, window(1, time.Second), limiter.Options{})
	require.NoError(t, b.Wait(context.Background()))
	list := waitAs(b, limiter.ClassList, 0)
	untilWaiting(t, clk, 1)
	write := waitAs(b, limiter.ClassWrite, 0)
	untilWaiting(t, clk, 2)

	clk.Step(time.Second)
	require.NoError(t, harness.Result(t, list))
	harness.Pending(t, write)
	clk.Step(time.Second)
	require.NoError(t, harness.Result(t, write))
}

// While every class waits, each is given slots in proportion to its
// weight: 8, 4, 2 and 1 of every 15 by default.
func TestClassesShareSlotsByWeight(t *testing.T) {
	b, clk := setup(t, window(1, time.Millisecond), classes())
	require.NoError(t, b.Wait(context.Background()))
	const each = 30
	done := make(chan limiter.Class, 4*each)
	n := 0
	for range each {
		for c := range limiter.Class(limiter.NumClasses) {
			ch := waitAs(b, c, 0)
			go func() {
				if <-ch == nil {
					done <- c
				}
			}()
			n++
			untilWaiting(t, clk, n)
		}
	}
	var got [limiter.NumClasses]int
	for i := range 15 {
		clk.Step(time.Millisecond)
		got[<-done]++
		untilWaitingExactly(t, clk, n-i-1)
	}
	assert.Equal(t, [limiter.NumClasses]int{8, 4, 2, 1}, got, "slots by class of the first 15 given")
}

// untilWaitingExactly blocks until n requests sleep: those that traded
// their slots have gone back to sleep.
func untilWaitingExactly(t *testing.T, clk interface{ Waiters() int }, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return clk.Waiters() == n }, 5*time.Second, time.Millisecond, "waiting for %d sleeping requests", n)
}

// An event that would wait longer than EventMaxWait is refused at once,
// naming its class; a write waits.
func TestAnEventThatWouldWaitLongIsRefusedAtOnce(t *testing.T) {
	b, clk := setup(t, window(1, 10*time.Second), classes())
	require.NoError(t, b.Wait(context.Background()))

	err := b.Wait(limiter.WithClass(context.Background(), limiter.ClassEvent))
	rle := harness.RateLimitExceeded(t, err)
	assert.Equal(t, "event", rle.Class)
	assert.Equal(t, limiter.EventMaxWait, rle.MaxWait)
	assert.Equal(t, rlerrors.WaitingForRateSlot, rle.WaitingFor)
	assert.Zero(t, clk.Waiters(), "decided before sleeping")
	assert.Contains(t, err.Error(), "next event slot in 10s")

	write := waitAs(b, limiter.ClassWrite, 0)
	untilWaiting(t, clk, 1)
	clk.Step(10 * time.Second)
	assert.NoError(t, harness.Result(t, write))
}

func TestClassOfARequest(t *testing.T) {
	tests := []struct {
		method, path string
		want         limiter.Class
	}{
		{"GET", "/api/v1/namespaces/ns/pods", limiter.ClassList},
		{"GET", "/api/v1/namespaces/ns/pods/p", limiter.ClassRead},
		{"GET", "/api/v1/namespaces/ns/pods/p/status", limiter.ClassRead},
		{"GET", "/api/v1/pods", limiter.ClassList},
		{"GET", "/api/v1/nodes/n", limiter.ClassRead},
		{"GET", "/api/v1/namespaces", limiter.ClassList},
		{"GET", "/api/v1/namespaces/ns", limiter.ClassRead},
		{"GET", "/api/v1/namespaces/ns/status", limiter.ClassRead},
		{"GET", "/api/v1/watch/namespaces/ns/pods/p", limiter.ClassList},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments", limiter.ClassList},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments/d", limiter.ClassRead},
		{"GET", "/apis/apps/v1/deployments", limiter.ClassList},
		{"GET", "/k8s/clusters/c-1/api/v1/namespaces/ns/configmaps", limiter.ClassList},
		{"GET", "/api", limiter.ClassRead},
		{"GET", "/apis/apps/v1", limiter.ClassRead},
		{"GET", "/version", limiter.ClassRead},
		{"HEAD", "/api/v1/namespaces/ns/pods/p", limiter.ClassRead},
		{"POST", "/api/v1/namespaces/ns/pods", limiter.ClassWrite},
		{"PUT", "/api/v1/namespaces/ns/pods/p", limiter.ClassWrite},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", limiter.ClassWrite},
		{"DELETE", "/api/v1/namespaces/ns/pods", limiter.ClassWrite},
		{"POST", "/api/v1/namespaces/ns/events", limiter.ClassEvent},
		{"PATCH", "/api/v1/namespaces/ns/events/e", limiter.ClassEvent},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", limiter.ClassEvent},
		{"POST", "/apis/other.example.com/v1/namespaces/ns/events", limiter.ClassWrite},
		{"GET", "/api/v1/namespaces/ns/events", limiter.ClassList},
		{"POST", "/api/v1/namespaces/events", limiter.ClassWrite}, // a namespace named events
	}
	for _, tt := range tests {
		r := &http.Request{Method: tt.method, URL: &url.URL{Path: tt.path}}
		assert.Equal(t, tt.want, limiter.ClassOf(r.WithContext(context.Background())), "%s %s", tt.method, tt.path)
	}
	r := &http.Request{Method: "GET", URL: &url.URL{Path: "/api/v1/namespaces/ns/pods"}}
	r = r.WithContext(limiter.WithClass(context.Background(), limiter.ClassWrite))
	assert.Equal(t, limiter.ClassWrite, limiter.ClassOf(r), "the context's class wins")
}

func FuzzClassOfAPath(f *testing.F) {
	for _, p := range []string{"/api/v1/namespaces/ns/pods", "/apis/events.k8s.io/v1/namespaces/ns/events", "", "/", "//api//v1//", "/apis/", "/api/v1/namespaces//x"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, m := range []string{"GET", "POST"} {
			limiter.ClassOf(&http.Request{Method: m, URL: &url.URL{Path: p}})
		}
		// Whatever prefix comes before, a namespaced collection is
		// listed, an object in it read, and an event written as one.
		prefix := strings.TrimRight(p, "/")
		if strings.Contains(prefix+"/", "/api/") || strings.Contains(prefix+"/", "/apis/") || strings.Contains(prefix+"/", "/watch/") {
			return // the prefix itself reads as a path of the API
		}
		for path, want := range map[string]limiter.Class{
			prefix + "/api/v1/namespaces/ns/pods":   limiter.ClassList,
			prefix + "/api/v1/namespaces/ns/pods/p": limiter.ClassRead,
		} {
			if got := limiter.ClassOf(&http.Request{Method: "GET", URL: &url.URL{Path: path}}); got != want {
				t.Fatalf("GET %s is %v, want %v", path, got, want)
			}
		}
		if got := limiter.ClassOf(&http.Request{Method: "POST", URL: &url.URL{Path: prefix + "/api/v1/namespaces/ns/events"}}); got != limiter.ClassEvent {
			t.Fatalf("POST %s/api/v1/namespaces/ns/events is %v", prefix, got)
		}
	})
}
