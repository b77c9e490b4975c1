package limiter

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// held is a server that holds every request until the test answers it.
type held struct{ arrived chan *heldRequest }

type heldRequest struct {
	path   string
	answer chan *http.Response
}

func (h held) RoundTrip(req *http.Request) (*http.Response, error) {
	r := &heldRequest{path: req.URL.Path, answer: make(chan *http.Response)}
	h.arrived <- r
	resp := <-r.answer
	resp.Request = req
	return resp, nil
}

// next returns the next request to arrive, or fails.
func (h held) next(t *testing.T) *heldRequest {
	t.Helper()
	select {
	case r := <-h.arrived:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no request arrived")
		return nil
	}
}

// none asserts that no request arrives now.
func (h held) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-h.arrived:
		t.Fatalf("%s arrived, past the concurrency limit", r.path)
	case <-time.After(50 * time.Millisecond):
	}
}

func (r *heldRequest) respond(status int, header http.Header) {
	if header == nil {
		header = http.Header{}
	}
	r.answer <- &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(strings.NewReader("{}"))}
}

// A throttle cuts the limit while requests that took their seats before
// it wait for their slots, holding them, through the cooldown it began:
// when the cooldown ends they leave at the limit after the cut, not all
// together at the one before.
func TestSeatHoldersLeaveAtTheLimitAfterTheCutWhenTheCooldownEnds(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	l := New(memorystore.New(clk), Options{
		Policy:      store.Policy{Strategy: store.StrategyWindow, Limit: 10000, Timespan: time.Second},
		Clock:       clk,
		Concurrency: Concurrency{Adaptive: true},
	})
	t.Cleanup(func() { l.Close() })
	b := l.Budget("k8s:default:api.example.com", "test")
	b.seats.mu.Lock()
	b.seats.ctl.limit = 4
	b.seats.mu.Unlock()
	srv := held{arrived: make(chan *heldRequest, 10)}
	rt := b.Wrap(srv)

	var wg sync.WaitGroup
	send := func(path string) {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api.example.com"+path, nil)
			if resp, err := rt.RoundTrip(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	inFlight := map[string]*heldRequest{}
	for _, p := range []string{"/a", "/b", "/c", "/d"} {
		send(p)
		r := srv.next(t)
		inFlight[r.path] = r
	}
	send("/h")
	send("/i")
	require.Eventually(t, func() bool { return b.Seats().Waiting == 2 }, 5*time.Second, time.Millisecond)

	_, err := b.SetCooldown(context.Background(), time.Second)
	require.NoError(t, err)
	inFlight["/a"].respond(http.StatusOK, nil)
	inFlight["/b"].respond(http.StatusOK, nil)
	// /h and /i take the seats /a and /b gave back, and wait through the
	// cooldown for their slots holding them.
	require.Eventually(t, func() bool { return b.Seats().Waiting == 0 && clk.HasWaiters() }, 5*time.Second, time.Millisecond)
	inFlight["/c"].respond(http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})
	require.Eventually(t, func() bool { return b.Seats().Limit == 2 }, 5*time.Second, time.Millisecond, "cut to 3/4 of the 3 seats in use when /c was sent")

	clk.Step(time.Second + time.Millisecond)
	first := srv.next(t)
	srv.none(t) // /d and first are the 2 in flight
	inFlight["/d"].respond(http.StatusOK, nil)
	second := srv.next(t)
	assert.ElementsMatch(t, []string{"/h", "/i"}, []string{first.path, second.path})
	first.respond(http.StatusOK, nil)
	second.respond(http.StatusOK, nil)
	wg.Wait()
}
