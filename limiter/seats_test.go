package limiter_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// server is a RoundTripper that holds each request until the test answers
// it, and counts requests in flight as the server sees them.
type server struct {
	arrived  chan *pending
	inFlight atomic.Int32
	maxIn    atomic.Int32
}

type pending struct {
	req    *http.Request
	answer chan *http.Response
}

func newServer() *server { return &server{arrived: make(chan *pending, 100)} }

func (s *server) RoundTrip(req *http.Request) (*http.Response, error) {
	n := s.inFlight.Add(1)
	for old := s.maxIn.Load(); n > old && !s.maxIn.CompareAndSwap(old, n); old = s.maxIn.Load() {
	}
	p := &pending{req: req, answer: make(chan *http.Response)}
	s.arrived <- p
	resp := <-p.answer
	if resp == nil {
		s.inFlight.Add(-1)
		return nil, errors.New("connection reset")
	}
	return resp, nil
}

// next returns the next request to arrive.
func (s *server) next(t *testing.T) *pending {
	t.Helper()
	select {
	case p := <-s.arrived:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no request arrived")
		return nil
	}
}

// none asserts that no request arrives now.
func (s *server) none(t *testing.T) {
	t.Helper()
	select {
	case p := <-s.arrived:
		t.Fatalf("%s arrived, past the concurrency limit", p.req.URL.Path)
	case <-time.After(20 * time.Millisecond):
	}
}

// respond answers p with status and a body the server counts as finished
// when the client reads it to its end or closes it.
func (s *server) respond(p *pending, status int, header http.Header) {
	if header == nil {
		header = http.Header{}
	}
	p.answer <- &http.Response{StatusCode: status, Header: header, Body: &serverBody{Reader: strings.NewReader("{}"), s: s}, Request: p.req}
}

type serverBody struct {
	io.Reader
	s    *server
	once sync.Once
}

func (b *serverBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.once.Do(func() { b.s.inFlight.Add(-1) })
	}
	return n, err
}

func (b *serverBody) Close() error {
	b.once.Do(func() { b.s.inFlight.Add(-1) })
	return nil
}

// seated returns a transport of a budget with the concurrency c on a fake
// clock, and a roomy rate budget, in front of a new server.
func seated(t *testing.T, c limiter.Concurrency, opts limiter.Options) (http.RoundTripper, *server, *limiter.Budget, *clocktesting.FakeClock) {
	t.Helper()
	opts.Concurrency = c
	b, clk := setup(t, window(10000, time.Second), opts)
	srv := newServer()
	return b.Wrap(srv), srv, b, clk
}

// send sends a GET of path through rt on a goroutine; the channel gets its
// response (body read to its end and closed) or error.
func send(ctx context.Context, rt http.RoundTripper, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com"+path, nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	return done
}

func TestSeatsNeverMoreInFlightThanTheLimitServedInOrder(t *testing.T) {
	rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 3}, limiter.Options{})
	ctx := context.Background()
	var results []<-chan error
	var first []*pending
	for i := range 3 {
		results = append(results, send(ctx, rt, "/r"+string(rune('a'+i))))
		first = append(first, srv.next(t))
	}
	// The others queue for a seat, in order of arrival.
	for i := 3; i < 10; i++ {
		results = append(results, send(ctx, rt, "/r"+string(rune('a'+i))))
		require.Eventually(t, func() bool { return b.Seats().Waiting == i-2 }, 5*time.Second, time.Millisecond)
	}
	srv.none(t)
	assert.Equal(t, limiter.SeatStatus{Limit: 3, Share: 3, InUse: 3, Waiting: 7,
		ByClass: [limiter.NumClasses]limiter.ClassSeats{limiter.ClassRead: {InFlight: 3, Waiting: 7}}}, b.Seats())

	// Each seat that frees goes to the head of the line.
	queue := first
	for i := 3; i < 10; i++ {
		srv.respond(queue[0], http.StatusOK, nil)
		p := srv.next(t)
		assert.Equal(t, "/r"+string(rune('a'+i)), p.req.URL.Path, "first come, first served")
		queue = append(queue[1:], p)
	}
	for _, p := range queue {
		srv.respond(p, http.StatusOK, nil)
	}
	for _, r := range results {
		require.NoError(t, harness.Result(t, r))
	}
	assert.LessOrEqual(t, srv.maxIn.Load(), int32(3))
	assert.Equal(t, limiter.SeatStatus{Limit: 3, Share: 3}, b.Seats())
}

// oneRequest sends one request through a budget of one seat and returns
// what the server got, with a second request queued behind it.
func TestSeatIsHeldUntilTheResponseIsFinished(t *testing.T) {
	tests := []struct {
		name   string
		finish func(*http.Response)
	}{
		{"body read to its end", func(r *http.Response) { _, _ = io.Copy(io.Discard, r.Body) }},
		{"body closed unread", func(r *http.Response) { r.Body.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{})
			got := make(chan *http.Response, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/api/v1/pods", nil)
				resp, err := rt.RoundTrip(req)
				assert.NoError(t, err)
				got <- resp
			}()
			srv.respond(srv.next(t), http.StatusOK, nil)
			resp := <-got
			second := send(context.Background(), rt, "/second")
			srv.none(t)
			assert.Equal(t, 1, b.Seats().InUse, "headers alone do not free the seat")

			tt.finish(resp)
			srv.respond(srv.next(t), http.StatusOK, nil)
			require.NoError(t, harness.Result(t, second))
		})
	}
}

// A watch-list holds its seat longer: see
// TestWatchListHoldsItsSeatUntilItsInitialEventsEnd.
func TestSeatOfAWatchIsFreedWhenItsHeadersArrive(t *testing.T) {
	for _, path := range []string{
		"/api/v1/pods?watch=true",
		"/api/v1/watch/pods",
	} {
		t.Run(path, func(t *testing.T) {
			rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{})
			got := make(chan *http.Response, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+path, nil)
				resp, err := rt.RoundTrip(req)
				assert.NoError(t, err)
				got <- resp
			}()
			srv.respond(srv.next(t), http.StatusOK, nil)
			resp := <-got
			assert.Zero(t, b.Seats().InUse, "the watch goes on without a seat")
			second := send(context.Background(), rt, "/second")
			srv.respond(srv.next(t), http.StatusOK, nil)
			require.NoError(t, harness.Result(t, second))
			resp.Body.Close()
		})
	}
}

func TestRequestsOutsideSeatsTakeNone(t *testing.T) {
	for _, tt := range []struct {
		name, path string
		header     http.Header
	}{
		{"exec", "/api/v1/namespaces/ns/pods/p/exec?command=ls", nil},
		{"websocket attach", "/api/v1/namespaces/ns/pods/p/attach", http.Header{"Sec-Websocket-Protocol": {"v5.channel.k8s.io"}}},
		{"lease", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", nil},
		{"pods/log follow", "/api/v1/namespaces/ns/pods/p/log?follow=true", nil},
		{"pod proxy", "/api/v1/namespaces/ns/pods/p/proxy/metrics", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{})
			hold := send(context.Background(), rt, "/api/v1/pods")
			holder := srv.next(t)
			require.Equal(t, 1, b.Seats().InUse)

			got := make(chan *http.Response, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+tt.path, nil)
				req.Header = tt.header
				resp, err := rt.RoundTrip(req)
				assert.NoError(t, err)
				got <- resp
			}()
			srv.respond(srv.next(t), http.StatusOK, nil)
			(<-got).Body.Close()
			assert.Equal(t, 1, b.Seats().InUse, "only the first request holds a seat")
			srv.respond(holder, http.StatusOK, nil)
			require.NoError(t, harness.Result(t, hold))
		})
	}
}

func TestWithoutLimitTakesNoSeat(t *testing.T) {
	rt, srv, _, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{})
	hold := send(context.Background(), rt, "/first")
	holder := srv.next(t)
	free := send(k8sratelimit.WithoutLimit(context.Background()), rt, "/free")
	srv.respond(srv.next(t), http.StatusOK, nil)
	require.NoError(t, harness.Result(t, free))
	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
}

func TestFailedRoundTripFreesItsSeat(t *testing.T) {
	rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{})
	failed := send(context.Background(), rt, "/fails")
	p := srv.next(t)
	next := send(context.Background(), rt, "/next")
	require.Eventually(t, func() bool { return b.Seats().Waiting == 1 }, 5*time.Second, time.Millisecond)
	p.answer <- nil // the connection breaks
	require.Error(t, harness.Result(t, failed))
	srv.respond(srv.next(t), http.StatusOK, nil)
	require.NoError(t, harness.Result(t, next))
	assert.Zero(t, b.Seats().InUse)
}

func TestSeatWaitBeyondMaxWait(t *testing.T) {
	rt, srv, b, clk := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{MaxWait: new(time.Second)})
	hold := send(context.Background(), rt, "/first")
	holder := srv.next(t)

	t.Run("max wait 0 is refused at once", func(t *testing.T) {
		err := harness.Result(t, send(k8sratelimit.WithMaxWait(context.Background(), 0), rt, "/never"))
		var rle *rlerrors.RateLimitExceededError
		require.ErrorAs(t, err, &rle)
		assert.Positive(t, rle.RetryAfter())
	})
	t.Run("given up when max wait has passed", func(t *testing.T) {
		done := send(context.Background(), rt, "/second")
		require.Eventually(t, func() bool { return b.Seats().Waiting == 1 && clk.HasWaiters() }, 5*time.Second, time.Millisecond)
		clk.Step(999 * time.Millisecond)
		harness.Pending(t, done)
		clk.Step(time.Millisecond)
		var rle *rlerrors.RateLimitExceededError
		require.ErrorAs(t, harness.Result(t, done), &rle)
		assert.Equal(t, time.Second, rle.MaxWait)
		assert.Zero(t, b.Seats().Waiting, "its place in line is gone")
	})
	t.Run("a deadline before a seat fails with a typed error", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(-time.Millisecond))
		defer cancel()
		err := harness.Result(t, send(ctx, rt, "/late"))
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
}

func TestCooldownLongerThanMaxWaitRefusesSeatWaitAtOnce(t *testing.T) {
	rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{MaxWait: new(time.Second)})
	hold := send(context.Background(), rt, "/first")
	holder := srv.next(t)
	_, err := b.SetCooldown(context.Background(), 5*time.Second)
	require.NoError(t, err)
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, harness.Result(t, send(context.Background(), rt, "/second")), &rle)
	assert.InDelta(t, 5*time.Second, rle.RetryAfter(), float64(10*time.Millisecond), "the cooldown every seat holder waits out first")
	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
}

func TestCancelledSeatWaitLeavesTheLine(t *testing.T) {
	rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{})
	hold := send(context.Background(), rt, "/first")
	holder := srv.next(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := send(ctx, rt, "/cancelled")
	require.Eventually(t, func() bool { return b.Seats().Waiting == 1 }, 5*time.Second, time.Millisecond)
	after := send(context.Background(), rt, "/after")
	require.Eventually(t, func() bool { return b.Seats().Waiting == 2 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, harness.Result(t, cancelled), context.Canceled)
	srv.respond(holder, http.StatusOK, nil)
	p := srv.next(t)
	assert.Equal(t, "/after", p.req.URL.Path)
	srv.respond(p, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, after))
	require.NoError(t, harness.Result(t, hold))
}

func TestCloseWakesSeatWaiters(t *testing.T) {
	rt, srv, b, _ := seated(t, limiter.Concurrency{Fixed: 1}, limiter.Options{})
	hold := send(context.Background(), rt, "/first")
	holder := srv.next(t)
	waiting := send(context.Background(), rt, "/waiting")
	require.Eventually(t, func() bool { return b.Seats().Waiting == 1 }, 5*time.Second, time.Millisecond)
	closed := make(chan struct{})
	go func() { b.Engine().Close(); close(closed) }()
	require.ErrorIs(t, harness.Result(t, waiting), rlerrors.ErrClosed)
	srv.respond(holder, http.StatusOK, nil)
	require.NoError(t, harness.Result(t, hold))
	<-closed
}

func TestBothLimitsHold(t *testing.T) {
	// 4 per second and 2 seats: the rate decides while answers are quick.
	clk := clocktesting.NewFakeClock(time.Now())
	sends := make(chan time.Time, 100)
	rt := harness.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		sends <- clk.Now()
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
	})
	l := limiter.New(memorystore.New(clk), limiter.Options{Policy: window(4, time.Second), Clock: clk, Concurrency: limiter.Concurrency{Fixed: 2}})
	t.Cleanup(func() { l.Close() })
	tr := l.Budget(key, "test").Wrap(rt)
	var results []<-chan error
	for range 12 {
		results = append(results, send(context.Background(), tr, "/r"))
	}
	for _, r := range results {
		for done := false; !done; {
			select {
			case err := <-r:
				require.NoError(t, err)
				done = true
			case <-time.After(time.Millisecond):
				if clk.HasWaiters() {
					clk.Step(100 * time.Millisecond)
				}
			}
		}
	}
	close(sends)
	var at []time.Time
	for s := range sends {
		at = append(at, s)
	}
	require.Len(t, at, 12)
	for i := 4; i < len(at); i++ {
		assert.GreaterOrEqual(t, at[i].Sub(at[i-4]), time.Second, "no more than 4 in any second")
	}
}

// A throttle cuts the limit while requests that took their seats before
// it wait for their slots, holding them, through the cooldown it began:
// when the cooldown ends they leave at the limit after the cut, not all
// together at the one before.
func TestSeatHoldersLeaveAtTheLimitAfterTheCutWhenTheCooldownEnds(t *testing.T) {
	rt, srv, b, clk := seated(t, limiter.Concurrency{Adaptive: true}, limiter.Options{})
	limiter.SetSeatLimit(b, 4)
	ctx := context.Background()
	var results []<-chan error
	inFlight := map[string]*pending{}
	for _, p := range []string{"/a", "/b", "/c", "/d"} {
		results = append(results, send(ctx, rt, p))
		r := srv.next(t)
		inFlight[r.req.URL.Path] = r
	}
	results = append(results, send(ctx, rt, "/h"), send(ctx, rt, "/i"))
	require.Eventually(t, func() bool { return b.Seats().Waiting == 2 }, 5*time.Second, time.Millisecond)

	_, err := b.SetCooldown(ctx, time.Second)
	require.NoError(t, err)
	srv.respond(inFlight["/a"], http.StatusOK, nil)
	srv.respond(inFlight["/b"], http.StatusOK, nil)
	// /h and /i take the seats /a and /b gave back, and wait through the
	// cooldown for their slots holding them.
	require.Eventually(t, func() bool { return b.Seats().Waiting == 0 && clk.HasWaiters() }, 5*time.Second, time.Millisecond)
	srv.respond(inFlight["/c"], http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})
	require.Eventually(t, func() bool { return b.Seats().Limit == 2 }, 5*time.Second, time.Millisecond, "cut to 3/4 of the 3 seats in use when /c was sent")

	clk.Step(time.Second + time.Millisecond)
	first := srv.next(t)
	srv.none(t) // /d and first are the 2 in flight
	srv.respond(inFlight["/d"], http.StatusOK, nil)
	second := srv.next(t)
	assert.ElementsMatch(t, []string{"/h", "/i"}, []string{first.req.URL.Path, second.req.URL.Path})
	srv.respond(first, http.StatusOK, nil)
	srv.respond(second, http.StatusOK, nil)
	for _, r := range results {
		require.NoError(t, harness.Result(t, r))
	}
	assert.LessOrEqual(t, srv.maxIn.Load(), int32(4))
}
