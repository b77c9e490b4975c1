package limiter_test

// Integration tests of the limiter with real client-go clients (typed
// clientsets, remotecommand, portforward, informers, leader election)
// against the simulated API server in internal/apisim.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/decided"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// ---------------------------------------------------------------------------
// Harness

const (
	cgCluster = "test"
	cgNS      = "default"
)

// cgHarness is an apisim server and a limiter whose budget for it is
// plugged into a rest.Config, a typed clientset and a raw http.Client.
type cgHarness struct {
	srv    *apisim.Server
	store  *cgStore
	lim    *limiter.Engine
	budget *limiter.Budget
	key    string
	obs    *harness.Observer
	sends  *cgSends
	rc     *rest.Config
	cs     kubernetes.Interface
	raw    *http.Client // through the budget's transport, no client-go retries
}

// cgNew starts apisim and a limiter made with opts, whose Observer is
// replaced by the harness's recorder; the store reads opts.Clock.
func cgNew(t *testing.T, opts limiter.Options) *cgHarness {
	t.Helper()
	srv := apisim.New()
	t.Cleanup(srv.Close)

	var storeClock clock.PassiveClock
	if opts.Clock != nil {
		storeClock = opts.Clock
	}
	st := &cgStore{Store: memorystore.New(storeClock)}
	obs := &harness.Observer{}
	opts.Observer = obs
	lim := limiter.New(st, opts)
	t.Cleanup(func() { _ = lim.Close() })

	key := "k8s:test:" + srv.URL
	b := lim.Budget(key, cgCluster)
	sends := &cgSends{clock: opts.Clock}
	if sends.clock == nil {
		sends.clock = clock.RealClock{}
	}

	rc := &rest.Config{Host: srv.URL, QPS: -1}
	// The recorder is the inner transport: it sees a request at the instant
	// the limiter sends it.
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return b.Wrap(sends.wrap(rt)) })
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	raw := &http.Client{Transport: b.Wrap(sends.wrap(base))}

	return &cgHarness{srv: srv, store: st, lim: lim, budget: b, key: key, obs: obs, sends: sends, rc: rc, cs: cs, raw: raw}
}

func cgWindow(limit int, span time.Duration) store.Policy {
	return store.Policy{Strategy: store.StrategyWindow, Limit: limit, Timespan: span}
}

// getPod is a counted request through the typed clientset.
func (h *cgHarness) getPod(ctx context.Context, name string) error {
	_, err := h.cs.CoreV1().Pods(cgNS).Get(ctx, name, metav1.GetOptions{})
	return err
}

// call is getPod bounded in time, for tests on a fake clock, where a
// request that waits by mistake would never return.
func (h *cgHarness) call(t *testing.T, ctx context.Context, name string) error {
	t.Helper()
	return harness.Result(t, harness.Async(func() error { return h.getPod(ctx, name) }))
}

// exhaust sends the one request the budget allows and checks that the next
// counted request is refused at once.
func (h *cgHarness) exhaust(t *testing.T) {
	t.Helper()
	require.NoError(t, h.getPod(context.Background(), "first"), "the first request fits the budget")
	err := h.getPod(context.Background(), "second")
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle, "the budget is exhausted")
	require.Equal(t, 0, h.srv.Count("/pods/second"), "a refused request is not sent")
}

// rawGet sends a GET of path through the budget's transport, without
// client-go, and returns the response with its body read.
func (h *cgHarness) rawGet(ctx context.Context, path string, header http.Header) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+path, nil)
	if err != nil {
		return nil, "", err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := h.raw.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// storeCooldown returns the cooldown left on the harness's budget.
func (h *cgHarness) storeCooldown(t *testing.T) time.Duration {
	t.Helper()
	d, err := h.store.Cooldown(context.Background(), h.key)
	require.NoError(t, err)
	return d
}

// cgStore counts the calls the limiter makes to its store, records each
// reservation with the request's tag (see cgTag), and records the span of
// every call in which the store said go (a Reserve with no wait, a Confirm
// with none left), on the real clock.
type cgStore struct {
	store.Store

	decisions decided.Recorder

	reserves atomic.Int32 // every Reserve call
	admitted atomic.Int32 // reservations with OK
	deferred atomic.Int32 // reservations with OK and a wait
	confirms atomic.Int32

	mu    sync.Mutex
	slots map[int]cgSlot // by tag
	waits []time.Duration
}

// cgSlot bounds the instant a reservation was made for: at or after
// earliest (the instant before the call plus the wait).
type cgSlot struct {
	earliest time.Time
	wait     time.Duration
}

func (s *cgStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	before := time.Now()
	res, err := s.Store.Reserve(ctx, key, p, r)
	if err == nil && res.OK && res.Wait == 0 {
		s.decisions.Add(before, time.Now())
	}
	s.reserves.Add(1)
	if err == nil && res.OK {
		s.admitted.Add(1)
		if res.Wait > 0 {
			s.deferred.Add(1)
		}
		s.mu.Lock()
		s.waits = append(s.waits, res.Wait)
		if tag, ok := ctx.Value(cgTagKey{}).(int); ok {
			if s.slots == nil {
				s.slots = make(map[int]cgSlot)
			}
			s.slots[tag] = cgSlot{earliest: before.Add(res.Wait), wait: res.Wait}
		}
		s.mu.Unlock()
	}
	return res, err
}

func (s *cgStore) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	s.confirms.Add(1)
	before := time.Now()
	left, err := s.Store.Confirm(ctx, key, id)
	if err == nil && left == 0 {
		s.decisions.Add(before, time.Now())
	}
	return left, err
}

func (s *cgStore) reservedWaits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits)
}

func (s *cgStore) slot(tag int) (cgSlot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slots[tag]
	return sl, ok
}

// cgTag marks a request's context so that its reservation and its send
// can be matched.
type cgTagKey struct{}

func cgTag(ctx context.Context, tag int) context.Context {
	return context.WithValue(ctx, cgTagKey{}, tag)
}

// cgSends records the instant (on its clock) each request is passed on by
// the limiter.
type cgSends struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	all   []cgSend
	count atomic.Int32
}

type cgSend struct {
	at   time.Time
	tag  int // -1 when untagged
	path string
}

func (s *cgSends) wrap(next http.RoundTripper) http.RoundTripper {
	return harness.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		tag, ok := req.Context().Value(cgTagKey{}).(int)
		if !ok {
			tag = -1
		}
		s.mu.Lock()
		s.all = append(s.all, cgSend{at: s.clock.Now(), tag: tag, path: req.URL.Path})
		s.mu.Unlock()
		s.count.Add(1)
		return next.RoundTrip(req)
	})
}

func (s *cgSends) list() []cgSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.all)
}

// instants returns the sorted send instants of the requests whose path
// contains part.
func (s *cgSends) instants(part string) []time.Time {
	var out []time.Time
	for _, x := range s.list() {
		if strings.Contains(x.path, part) {
			out = append(out, x.at)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// cgThrottleOnce makes srv answer the first request whose path contains
// part with status and header, and serve every other one.
func cgThrottleOnce(srv *apisim.Server, part string, status int, header http.Header) {
	var done atomic.Bool
	srv.SetThrottle(func(r *http.Request) (int, http.Header) {
		if strings.Contains(r.URL.Path, part) && done.CompareAndSwap(false, true) {
			return status, header
		}
		return 0, nil
	})
}

// cgWindowViolation describes the first rolling span that holds more than
// limit of the sorted instants, or returns "". It is exact: for instants
// on a fake clock.
func cgWindowViolation(instants []time.Time, limit int, span time.Duration) string {
	for i := 0; i+limit < len(instants); i++ {
		if gap := instants[i+limit].Sub(instants[i]); gap < span {
			return fmt.Sprintf("sends %d and %d are %v apart: %d requests within %v", i, i+limit, gap, limit+1, span)
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// Streaming connections

// cgSubresourceURL is the URL of a pod subresource as kubectl builds it.
func cgSubresourceURL(h *cgHarness, sub string) *url.URL {
	req := h.cs.CoreV1().RESTClient().Post().Namespace(cgNS).Resource("pods").Name("x").SubResource(sub)
	switch sub {
	case "exec":
		req = req.VersionedParams(&corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, scheme.ParameterCodec)
	case "attach":
		req = req.VersionedParams(&corev1.PodAttachOptions{Stdout: true}, scheme.ParameterCodec)
	}
	return req.URL()
}

// cgForward runs a port forward over dialer until it fails (apisim never
// upgrades the connection).
func cgForward(dialer httpstream.Dialer) error {
	stop := make(chan struct{})
	defer close(stop)
	pf, err := portforward.New(dialer, []string{":80"}, stop, make(chan struct{}), io.Discard, io.Discard)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return pf.ForwardPorts()
}

// exec, attach and portforward, in their SPDY and WebSocket forms, pass an
// exhausted budget at once, consume nothing, and get the server's answer.
func TestClientGoStreamingConnectionsAreExempt(t *testing.T) {
	stream := func(newExec func(h *cgHarness, u *url.URL) (remotecommand.Executor, error), sub string) func(h *cgHarness) error {
		return func(h *cgHarness) error {
			e, err := newExec(h, cgSubresourceURL(h, sub))
			if err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			return e.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &bytes.Buffer{}})
		}
	}
	spdyExec := func(h *cgHarness, u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewSPDYExecutor(h.rc, http.MethodPost, u)
	}
	wsExec := func(h *cgHarness, u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewWebSocketExecutor(h.rc, http.MethodGet, u.String())
	}

	tests := []struct {
		name string
		sub  string
		run  func(h *cgHarness) error
	}{
		{"spdy exec", "exec", stream(spdyExec, "exec")},
		{"spdy attach", "attach", stream(spdyExec, "attach")},
		{"spdy portforward", "portforward", func(h *cgHarness) error {
			rt, upgrader, err := spdy.RoundTripperFor(h.rc)
			if err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			return cgForward(spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, cgSubresourceURL(h, "portforward")))
		}},
		{"websocket exec", "exec", stream(wsExec, "exec")},
		{"websocket attach", "attach", stream(wsExec, "attach")},
		{"websocket portforward", "portforward", func(h *cgHarness) error {
			dialer, err := portforward.NewSPDYOverWebsocketDialer(cgSubresourceURL(h, "portforward"), h.rc)
			if err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			return cgForward(dialer)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(time.Duration(0))})
			h.exhaust(t)
			reserves := h.store.reserves.Load()

			start := time.Now()
			err := tt.run(h)
			elapsed := time.Since(start)

			require.Error(t, err, "apisim has no node to run the pod on")
			require.NotContains(t, err.Error(), "setup:")
			var rle *rlerrors.RateLimitExceededError
			assert.False(t, errors.As(err, &rle), "refused by the limiter: %v", err)
			assert.NotErrorIs(t, err, rlerrors.ErrClosed)
			assert.Contains(t, err.Error(), "has no node to "+tt.sub, "the error is the server's answer")
			assert.Equal(t, 1, h.srv.Count("/pods/x/"+tt.sub), "the request reached the server")
			assert.Less(t, elapsed, 3*time.Second, "not delayed")

			assert.Equal(t, reserves, h.store.reserves.Load(), "no slot was asked for")
			assert.Equal(t, int32(1), h.obs.Admits.Load(), "only the first request counted")
			assert.Equal(t, int32(1), h.obs.Rejects.Load(), "only the probe was refused")
			assert.Positive(t, h.obs.Exempts.Load())
		})
	}
}

// Streaming requests are recognised by their path alone and by a streaming
// protocol header alone; look-alikes are counted.
func TestClientGoStreamingRecognisedByPathOrHeader(t *testing.T) {
	h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(time.Duration(0))})
	h.exhaust(t)

	pods := "/api/v1/namespaces/default/pods"
	exempt := []struct {
		name   string
		path   string
		header http.Header
	}{
		{"exec path", pods + "/x/exec", nil},
		{"attach path", pods + "/x/attach", nil},
		{"portforward path", pods + "/x/portforward", nil},
		{"exec path behind a prefix", "/k8s/clusters/c1" + pods + "/x/exec", nil},
		{"Upgrade header", pods, http.Header{"Upgrade": {"SPDY/3.1"}}},
		{"X-Stream-Protocol-Version header", pods, http.Header{"X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}},
		{"Sec-WebSocket-Protocol header", pods, http.Header{"Sec-WebSocket-Protocol": {"v5.channel.k8s.io"}}},
	}
	for _, tt := range exempt {
		t.Run(tt.name, func(t *testing.T) {
			h.srv.Reset()
			reserves := h.store.reserves.Load()
			resp, _, err := h.rawGet(context.Background(), tt.path, tt.header)
			require.NoError(t, err)
			assert.NotZero(t, resp.StatusCode)
			assert.Len(t, h.srv.Requests(), 1, "the request reached the server")
			assert.Equal(t, reserves, h.store.reserves.Load(), "no slot was asked for")
		})
	}

	counted := []struct {
		name string
		path string
	}{
		{"pod list", pods},
		{"pod named exec", pods + "/exec"},
		{"log subresource", pods + "/x/log"},
		{"exec of something that is not a pod", "/api/v1/namespaces/default/services/x/exec"},
	}
	for _, tt := range counted {
		t.Run("counted "+tt.name, func(t *testing.T) {
			h.srv.Reset()
			_, _, err := h.rawGet(context.Background(), tt.path, nil)
			harness.RateLimitExceeded(t, err)
			assert.Empty(t, h.srv.Requests(), "nothing was sent")
		})
	}
}

// ---------------------------------------------------------------------------
// Leases

func cgLeaseGetUpdate(t *testing.T, h *cgHarness) {
	t.Helper()
	start := time.Now()
	leases := h.cs.CoordinationV1().Leases(cgNS)
	l, err := leases.Get(context.Background(), "leader", metav1.GetOptions{})
	require.NoError(t, err)
	holder := "me"
	l.Spec.HolderIdentity = &holder
	_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "leases never wait")
	assert.Equal(t, 2, h.srv.Count("/leases/leader"))
}

// coordination.k8s.io leases pass at once with an exhausted budget, and
// during a cooldown set by hand or by a 429.
func TestClientGoLeasesAreExempt(t *testing.T) {
	t.Run("exhausted budget", func(t *testing.T) {
		h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(time.Duration(0))})
		h.exhaust(t)
		reserves := h.store.reserves.Load()
		cgLeaseGetUpdate(t, h)
		assert.Equal(t, reserves, h.store.reserves.Load(), "no slot was asked for")
	})

	t.Run("cooldown", func(t *testing.T) {
		h := cgNew(t, limiter.Options{Policy: cgWindow(100, time.Hour), MaxWait: new(time.Duration(0)), Adaptive: true})
		left, err := h.budget.SetCooldown(context.Background(), time.Hour)
		require.NoError(t, err)
		require.Equal(t, time.Hour, left.Round(time.Minute))
		harness.RateLimitExceeded(t, h.getPod(context.Background(), "x")) // counted requests cannot pass
		cgLeaseGetUpdate(t, h)
	})

	t.Run("cooldown from a 429", func(t *testing.T) {
		h := cgNew(t, limiter.Options{Policy: cgWindow(100, time.Hour), MaxWait: new(time.Duration(0)), Adaptive: true})
		cgThrottleOnce(h.srv, "/namespaces", http.StatusTooManyRequests, http.Header{"Retry-After": {"600"}})
		resp, _, err := h.rawGet(context.Background(), "/api/v1/namespaces", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Greater(t, h.storeCooldown(t), 9*time.Minute)

		rle := harness.RateLimitExceeded(t, h.getPod(context.Background(), "x"))
		assert.Greater(t, rle.RetryAfter(), 9*time.Minute)
		cgLeaseGetUpdate(t, h)
	})

	t.Run("leader election", func(t *testing.T) {
		h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(time.Duration(0)), Adaptive: true})
		h.exhaust(t)
		_, err := h.budget.SetCooldown(context.Background(), time.Hour)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: "leader", Namespace: cgNS},
				Client:     h.cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: "me"},
			},
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(started) },
				OnStoppedLeading: func() {},
			},
		})
		require.NoError(t, err)
		done := harness.Async(func() error { le.Run(ctx); return nil })
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			require.FailNow(t, "did not become leader with an exhausted budget in a cooldown")
		}
		cancel()
		require.NoError(t, harness.Result(t, done))
		assert.Positive(t, h.srv.Count("/leases/leader"))
		assert.Equal(t, int32(1), h.obs.Admits.Load(), "only the first request counted")
	})
}

// ---------------------------------------------------------------------------
// Watches

// A watch takes one slot when it is opened, however long it streams.
func TestClientGoWatchCountsOnce(t *testing.T) {
	h := cgNew(t, limiter.Options{Policy: cgWindow(2, time.Hour), MaxWait: new(time.Duration(0))})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := h.cs.CoreV1().Pods(cgNS).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		require.Equal(t, "ADDED", string(ev.Type))
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no watch event")
	}
	assert.Equal(t, int32(1), h.store.reserves.Load(), "one slot for the watch")
	assert.Equal(t, int32(1), h.obs.Admits.Load())

	require.NoError(t, h.getPod(context.Background(), "second"), "the watch left the second slot")
	harness.RateLimitExceeded(t, h.getPod(context.Background(), "third"))

	watches := 0
	for _, r := range h.srv.Requests() {
		if strings.Contains(r.Query, "watch=true") {
			watches++
		}
	}
	assert.Equal(t, 1, watches)
}

// ---------------------------------------------------------------------------
// Refusals

// A request whose slot is beyond the maximum wait fails at once with a
// typed error that survives the clientset, and nothing is sent.
func TestClientGoMaxWaitTypedError(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(100 * time.Millisecond), Clock: fc})

	require.NoError(t, h.call(t, context.Background(), "first"))
	err := h.call(t, context.Background(), "second")
	rle := harness.RateLimitExceeded(t, err)
	assert.Equal(t, cgCluster, rle.Cluster)
	assert.Equal(t, h.key, rle.Key)
	assert.Equal(t, time.Hour, rle.RetryAfter(), "the slot is one timespan after the first request")
	assert.Equal(t, 100*time.Millisecond, rle.MaxWait)
	assert.NoError(t, rle.Err)
	assert.True(t, apierrors.IsTooManyRequests(err))
	secs, ok := apierrors.SuggestsClientDelay(err)
	assert.True(t, ok)
	assert.Equal(t, 3600, secs)
	assert.Equal(t, 0, h.srv.Count("/pods/second"), "nothing was sent")
	assert.Equal(t, int32(1), h.sends.count.Load())

	fc.Step(45 * time.Minute)
	rle = harness.RateLimitExceeded(t, h.call(t, context.Background(), "third"))
	assert.Equal(t, 15*time.Minute, rle.RetryAfter())
	assert.Zero(t, fc.Waiters(), "nothing waits")
}

// A context whose deadline comes before the slot fails at once.
func TestClientGoDeadlineBeforeSlotFailsAtOnce(t *testing.T) {
	h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour)})
	require.NoError(t, h.getPod(context.Background(), "first"))

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := h.getPod(ctx, "second")
	elapsed := time.Since(start)

	require.Error(t, err)
	assert.Less(t, elapsed, 500*time.Millisecond, "fails at once, not at the deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	rle := harness.RateLimitExceeded(t, err)
	assert.Equal(t, context.DeadlineExceeded, rle.Err)
	assert.Greater(t, rle.RetryAfter(), 59*time.Minute)
	assert.LessOrEqual(t, rle.RetryAfter(), time.Hour)
	assert.Equal(t, 0, h.srv.Count("/pods/second"))
	assert.Zero(t, h.store.deferred.Load(), "nothing was reserved")
}

// Per-request overrides: WithMaxWait in both directions, and WithoutLimit.
func TestClientGoPerRequestOverrides(t *testing.T) {
	t.Run("WithMaxWait 0 where the default waits", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		h := cgNew(t, limiter.Options{Policy: cgWindow(1, 400*time.Millisecond), Clock: fc})
		require.NoError(t, h.call(t, context.Background(), "first"))

		rle := harness.RateLimitExceeded(t, h.call(t, k8sratelimit.WithMaxWait(context.Background(), 0), "now"))
		assert.Equal(t, 400*time.Millisecond, rle.RetryAfter())
		assert.Zero(t, rle.MaxWait)
		assert.Zero(t, fc.Waiters())
		assert.Equal(t, 0, h.srv.Count("/pods/now"))

		// The same request without the override waits for the slot.
		done := harness.Async(func() error { return h.getPod(context.Background(), "later") })
		harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "the default request waits")
		assert.Equal(t, 0, h.srv.Count("/pods/later"))
		fc.Step(400 * time.Millisecond)
		require.NoError(t, harness.Result(t, done))
		assert.Equal(t, 1, h.srv.Count("/pods/later"))
	})

	t.Run("WithMaxWait longer than the default", func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Now())
		h := cgNew(t, limiter.Options{Policy: cgWindow(1, 400*time.Millisecond), MaxWait: new(time.Duration(0)), Clock: fc})
		require.NoError(t, h.call(t, context.Background(), "first"))
		harness.RateLimitExceeded(t, h.call(t, context.Background(), "refused"))

		done := harness.Async(func() error {
			return h.getPod(k8sratelimit.WithMaxWait(context.Background(), time.Second), "later")
		})
		harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "the request waits")
		fc.Step(400 * time.Millisecond)
		require.NoError(t, harness.Result(t, done))
		assert.Equal(t, 1, h.srv.Count("/pods/later"))
	})

	t.Run("WithoutLimit", func(t *testing.T) {
		h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(time.Duration(0))})
		h.exhaust(t)
		reserves := h.store.reserves.Load()

		ctx := k8sratelimit.WithoutLimit(context.Background())
		require.NoError(t, h.getPod(ctx, "free"))
		_, err := h.cs.CoreV1().Pods(cgNS).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Equal(t, 1, h.srv.Count("/pods/free"))
		assert.Equal(t, reserves, h.store.reserves.Load(), "no slot was asked for")
		assert.Equal(t, int32(2), h.obs.Exempts.Load())
		harness.RateLimitExceeded(t, h.getPod(context.Background(), "still-exhausted"))
	})
}

// ---------------------------------------------------------------------------
// Informers

// cgListOnly is a ListWatch that tells the reflector not to use watch-list,
// so that its list meets the limiter.
type cgListOnly struct{ *cache.ListWatch }

func (cgListOnly) IsWatchListSemanticsUnSupported() bool { return true }

// A reflector whose list is refused backs off, as after a server's 429,
// instead of listing again at once. The server is not throttling: the
// limiter refuses with MaxWait 0 on an exhausted budget.
func TestClientGoReflectorBacksOff(t *testing.T) {
	// observe is how long the attempts are counted. The reflector's backoff
	// starts at 800ms with up to 100% jitter and doubles, so at most 2
	// attempts fit; a tight loop makes hundreds.
	const observe = 1500 * time.Millisecond
	const maxAttempts = 3

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(time.Duration(0))})
		h.exhaust(t)
		rejected := h.obs.Rejects.Load()

		lw := cgListOnly{cache.NewListWatchFromClient(h.cs.CoreV1().RESTClient(), "pods", cgNS, fields.Everything())}
		inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
		var mu sync.Mutex
		var errs []error
		require.NoError(t, inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		}))

		stop := make(chan struct{})
		done := harness.Async(func() error { inf.Run(stop); return nil })
		<-time.After(observe) // the observation window
		close(stop)
		require.NoError(t, harness.Result(t, done))

		attempts := h.obs.Rejects.Load() - rejected
		assert.GreaterOrEqual(t, attempts, int32(1))
		assert.LessOrEqual(t, attempts, int32(maxAttempts), "the reflector backed off")
		assert.Equal(t, 0, h.srv.Count("/api/v1/namespaces/default/pods")-h.srv.Count("/pods/first"), "no list reached the server")

		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, errs)
		for _, err := range errs {
			assert.True(t, apierrors.IsTooManyRequests(err), "%v", err)
			var rle *rlerrors.RateLimitExceededError
			assert.ErrorAs(t, err, &rle)
		}
	})

	t.Run("informer factory", func(t *testing.T) {
		t.Parallel()
		h := cgNew(t, limiter.Options{Policy: cgWindow(1, time.Hour), MaxWait: new(time.Duration(0))})
		h.exhaust(t)
		rejected := h.obs.Rejects.Load()

		factory := informers.NewSharedInformerFactory(h.cs, 0)
		factory.Core().V1().Pods().Informer()
		stop := make(chan struct{})
		factory.Start(stop)
		<-time.After(observe) // the observation window
		close(stop)
		factory.Shutdown()

		attempts := h.obs.Rejects.Load() - rejected
		assert.GreaterOrEqual(t, attempts, int32(1))
		assert.LessOrEqual(t, attempts, int32(maxAttempts), "the reflector backed off")
	})
}

// ---------------------------------------------------------------------------
// Adaptive cooldown

func TestClientGoAdaptiveCooldown(t *testing.T) {
	adaptive := limiter.Options{Policy: cgWindow(100, time.Hour), Adaptive: true}
	const namespaces = "/api/v1/namespaces"

	t.Run("Retry-After seconds", func(t *testing.T) {
		h := cgNew(t, adaptive)
		cgThrottleOnce(h.srv, namespaces, http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})

		resp, body, err := h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		// The response is passed back unchanged.
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		assert.Contains(t, body, "too many requests")
		assert.Equal(t, []harness.Throttle{{Code: http.StatusTooManyRequests, Cooldown: time.Second}}, h.obs.Throttles())

		start := time.Now()
		resp, _, err = h.rawGet(context.Background(), namespaces, nil)
		elapsed := time.Since(start)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.GreaterOrEqual(t, elapsed, 900*time.Millisecond, "the next request waited for the cooldown")
		assert.Less(t, elapsed, 3*time.Second)
	})

	t.Run("client-go retries the 429", func(t *testing.T) {
		h := cgNew(t, adaptive)
		cgThrottleOnce(h.srv, namespaces, http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})

		list, err := h.cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, list.Items, 1)
		assert.Equal(t, 2, h.srv.Count(namespaces), "the 429 and client-go's retry")
		assert.Equal(t, int32(2), h.obs.Admits.Load(), "the retry counted too")
	})

	t.Run("Retry-After HTTP-date read against Date", func(t *testing.T) {
		h := cgNew(t, adaptive)
		// A server clock far in the past: read against our clock, the date
		// would be long gone and ask for no cooldown at all.
		date := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		cgThrottleOnce(h.srv, namespaces, http.StatusTooManyRequests, http.Header{
			"Date":        {date.Format(http.TimeFormat)},
			"Retry-After": {date.Add(time.Second).Format(http.TimeFormat)},
		})
		resp, _, err := h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, []harness.Throttle{{Code: http.StatusTooManyRequests, Cooldown: time.Second}}, h.obs.Throttles())

		start := time.Now()
		_, _, err = h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
	})

	t.Run("503 without Retry-After sets nothing", func(t *testing.T) {
		h := cgNew(t, adaptive)
		cgThrottleOnce(h.srv, namespaces, http.StatusServiceUnavailable, nil)
		resp, _, err := h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Zero(t, h.storeCooldown(t))
		assert.Empty(t, h.obs.Throttles())

		start := time.Now()
		_, _, err = h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 500*time.Millisecond)
	})

	t.Run("503 with Retry-After cools down", func(t *testing.T) {
		h := cgNew(t, adaptive)
		cgThrottleOnce(h.srv, namespaces, http.StatusServiceUnavailable, http.Header{"Retry-After": {"30"}})
		_, _, err := h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		assert.Greater(t, h.storeCooldown(t), 29*time.Second)
	})

	t.Run("429 from a pod proxy sets nothing", func(t *testing.T) {
		h := cgNew(t, adaptive)
		cgThrottleOnce(h.srv, "/proxy", http.StatusTooManyRequests, http.Header{"Retry-After": {"5"}})
		resp, _, err := h.rawGet(context.Background(), "/api/v1/namespaces/default/pods/x/proxy/healthz", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Zero(t, h.storeCooldown(t))
		assert.Equal(t, []harness.Throttle{{Code: http.StatusTooManyRequests, Cooldown: 0}}, h.obs.Throttles())

		start := time.Now()
		_, _, err = h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 500*time.Millisecond)
	})

	t.Run("Adaptive off sets nothing", func(t *testing.T) {
		opts := adaptive
		opts.Adaptive = false
		h := cgNew(t, opts)
		cgThrottleOnce(h.srv, namespaces, http.StatusTooManyRequests, http.Header{"Retry-After": {"5"}})
		resp, _, err := h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Zero(t, h.storeCooldown(t))
		assert.Equal(t, []harness.Throttle{{Code: http.StatusTooManyRequests, Cooldown: 0}}, h.obs.Throttles())

		start := time.Now()
		_, _, err = h.rawGet(context.Background(), namespaces, nil)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 500*time.Millisecond)
	})
}

// A cooldown longer than the maximum wait fails the next request at once,
// telling it when the cooldown ends.
func TestClientGoCooldownBeyondMaxWait(t *testing.T) {
	h := cgNew(t, limiter.Options{Policy: cgWindow(100, time.Hour), Adaptive: true, MaxWait: new(200 * time.Millisecond)})
	cgThrottleOnce(h.srv, "/namespaces", http.StatusTooManyRequests, http.Header{"Retry-After": {"5"}})
	resp, _, err := h.rawGet(context.Background(), "/api/v1/namespaces", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	start := time.Now()
	err = h.getPod(context.Background(), "x")
	elapsed := time.Since(start)
	rle := harness.RateLimitExceeded(t, err)
	assert.Less(t, elapsed, 150*time.Millisecond, "fails at once")
	assert.Greater(t, rle.RetryAfter(), 4500*time.Millisecond)
	assert.LessOrEqual(t, rle.RetryAfter(), 5*time.Second)
	assert.Equal(t, 200*time.Millisecond, rle.MaxWait)
	assert.Equal(t, 0, h.srv.Count("/pods/x"))
}

// ---------------------------------------------------------------------------
// Waiting requests

// cgStep moves fc on by total in steps, letting the requests it wakes
// finish sending before each next step: settled reports that every woken
// request has either sent or armed a new timer.
func cgStep(t *testing.T, fc *clocktesting.FakeClock, total, step time.Duration, settled func() bool) {
	t.Helper()
	for moved := time.Duration(0); moved < total; moved += step {
		fc.Step(step)
		harness.Settle(t, settled, "requests settle after a step to %v", moved+step)
	}
}

// A cooldown that arrives while requests wait moves them all after it,
// keeping their order and spacing, so that the window stays exact. Send
// instants are read on the fake clock, so they are the slots themselves.
func TestClientGoCooldownMovesWaiters(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	h := cgNew(t, limiter.Options{Policy: cgWindow(2, 500*time.Millisecond), Clock: fc})
	t0 := fc.Now()

	var results []<-chan error
	for i := range 6 {
		results = append(results, harness.Async(func() error { return h.getPod(context.Background(), fmt.Sprintf("w-%d", i)) }))
	}
	harness.Settle(t, func() bool { return h.sends.count.Load() == 2 && fc.Waiters() == 4 }, "2 sent, 4 waiting")

	confirms := h.store.confirms.Load()
	left, err := h.budget.SetCooldown(context.Background(), 700*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 700*time.Millisecond, left)
	harness.Settle(t, func() bool { return h.store.confirms.Load() == confirms+4 && fc.Waiters() == 4 },
		"the waiters looked at their moved slots")

	cgStep(t, fc, 1300*time.Millisecond, 50*time.Millisecond, func() bool {
		return fc.Waiters()+int(h.sends.count.Load())-2 == 4
	})
	for _, ch := range results {
		require.NoError(t, harness.Result(t, ch))
	}

	sends := h.sends.instants("/pods/w-")
	ms := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	assert.Equal(t, []time.Time{ms(0), ms(0), ms(700), ms(700), ms(1200), ms(1200)}, sends,
		"moved by 200ms so the first comes at the cooldown's end, spacing kept")
	assert.Empty(t, cgWindowViolation(sends, 2, 500*time.Millisecond))
	for _, at := range sends {
		assert.False(t, at.After(t0) && at.Before(ms(700)), "sent during the cooldown at %v", at.Sub(t0))
	}
}

// Close wakes the waiters with ErrClosed and releases their slots; later
// counted requests fail with ErrClosed, exempt ones pass, and no goroutine
// is left behind.
func TestClientGoCloseReleasesWaiters(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	policy := cgWindow(1, time.Hour)
	h := cgNew(t, limiter.Options{Policy: policy, Clock: fc})
	require.NoError(t, h.call(t, context.Background(), "first"))
	baseline, sleepers := runtime.NumGoroutine(), cgSleepers()

	var results []<-chan error
	for i := range 3 {
		results = append(results, harness.Async(func() error { return h.getPod(context.Background(), fmt.Sprintf("waiter-%d", i)) }))
	}
	harness.Settle(t, func() bool { return fc.Waiters() == 3 }, "3 waiting")
	require.Equal(t, sleepers+3, cgSleepers(), "the waiters are seen waiting in their budget")

	require.NoError(t, h.lim.Close())
	for _, ch := range results {
		err := harness.Result(t, ch)
		assert.ErrorIs(t, err, rlerrors.ErrClosed)
		var rle *rlerrors.RateLimitExceededError
		assert.False(t, errors.As(err, &rle))
	}
	assert.Equal(t, 0, h.srv.Count("/pods/waiter-"), "no waiter was sent")
	assert.Zero(t, fc.Waiters(), "their timers are stopped")

	// Their slots were released: a newcomer on the store gets the first of
	// them, one timespan after the first request, not one after the last.
	res, err := h.store.Store.Reserve(context.Background(), h.key, policy, store.Request{MaxWait: store.NoMaxWait})
	require.NoError(t, err)
	assert.Equal(t, time.Hour, res.Wait)

	// No goroutine is left behind.
	// (Polled on this goroutine: require.Eventually runs its condition on
	// a goroutine of its own.)
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > baseline && time.Now().Before(deadline); {
		<-time.After(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), baseline, "goroutines are back to the baseline")
	assert.Equal(t, sleepers, cgSleepers(), "no goroutine is left waiting for a slot")

	// Counted requests fail at once; exempt ones pass.
	err = h.call(t, context.Background(), "after")
	assert.ErrorIs(t, err, rlerrors.ErrClosed)
	assert.Equal(t, 0, h.srv.Count("/pods/after"))
	_, err = h.cs.CoordinationV1().Leases(cgNS).Get(context.Background(), "leader", metav1.GetOptions{})
	assert.NoError(t, err)
	require.NoError(t, h.getPod(k8sratelimit.WithoutLimit(context.Background()), "free"))
	assert.Equal(t, 1, h.srv.Count("/leases/leader"))
	assert.NoError(t, h.lim.Close(), "Close is idempotent")
}

// cgSleepers counts the goroutines inside a Budget method: waiting for a
// slot, since nothing else there blocks.
func cgSleepers() int {
	buf := make([]byte, 4<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "limiter.(*Budget).") {
			n++
		}
	}
	return n
}

// A waiting request that is cancelled releases its slot, and the next
// caller gets it: it waits exactly as long as the cancelled one would have.
func TestClientGoCancelledWaiterFreesSlot(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	h := cgNew(t, limiter.Options{Policy: cgWindow(1, 600*time.Millisecond), Clock: fc})
	t0 := fc.Now()
	require.NoError(t, h.call(t, context.Background(), "first"))

	ctx, cancel := context.WithCancel(context.Background())
	a := harness.Async(func() error { return h.getPod(ctx, "a") })
	harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "a waits")
	waits := h.store.reservedWaits()
	waitA := waits[len(waits)-1]
	require.Equal(t, 600*time.Millisecond, waitA)

	cancel()
	assert.ErrorIs(t, harness.Result(t, a), context.Canceled)
	assert.Zero(t, fc.Waiters())
	assert.Equal(t, 0, h.srv.Count("/pods/a"))

	b := harness.Async(func() error { return h.getPod(context.Background(), "b") })
	harness.Settle(t, func() bool { return fc.Waiters() == 1 }, "b waits")
	waits = h.store.reservedWaits()
	assert.Equal(t, waitA, waits[len(waits)-1], "b got a's slot, not the one after it")

	fc.Step(600 * time.Millisecond)
	require.NoError(t, harness.Result(t, b))
	assert.Equal(t, []time.Time{t0.Add(600 * time.Millisecond)}, h.sends.instants("/pods/b"))
}

// cgConcurrent runs n typed Gets at once, each tagged with its index, and
// waits for them all.
func cgConcurrent(t *testing.T, h *cgHarness, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = h.getPod(cgTag(context.Background(), i), fmt.Sprintf("c-%d", i))
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "request %d", i)
	}
}

// cgWindowHolds checks on the store's decisions, timed on the real clock,
// that no limit+1 requests were let go within less than span: no group of
// limit+1 decision spans lies within less (package decided). The check's
// only slack is the width of those spans; the latency between a decision
// and its send does not enter it.
func cgWindowHolds(t *testing.T, h *cgHarness, limit int, span time.Duration) {
	t.Helper()
	c, ok := decided.Tightest(h.store.decisions.Spans(), limit+1)
	if !assert.True(t, ok, "more than %d decisions", limit) {
		return
	}
	assert.GreaterOrEqual(t, c.Within, span, "the window let %d requests go within %v: %v", limit+1, span, c)
	t.Logf("the closest %d decisions lie surely within %v, the widest of their spans %v", limit+1, c.Within, c.Widest())
}

// cgSentAfterSlot checks that no tagged request was sent before the slot
// the store reserved for it.
func cgSentAfterSlot(t *testing.T, h *cgHarness) {
	t.Helper()
	for _, s := range h.sends.list() {
		if s.tag < 0 {
			continue
		}
		slot, ok := h.store.slot(s.tag)
		if assert.True(t, ok, "request %d has a reservation", s.tag) {
			assert.False(t, s.at.Before(slot.earliest), "request %d was sent %v before its slot", s.tag, slot.earliest.Sub(s.at))
		}
	}
}

// Many concurrent callers are deferred, never sent before their slots, and
// no rolling timespan holds more than the limit, with and without jitter,
// checked on the store's decisions (cgWindowHolds).
func TestClientGoWindowExactUnderConcurrency(t *testing.T) {
	const (
		n     = 60
		limit = 20
		span  = 400 * time.Millisecond
	)
	for _, jitter := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(fmt.Sprintf("jitter %v", jitter), func(t *testing.T) {
			h := cgNew(t, limiter.Options{Policy: cgWindow(limit, span), Jitter: jitter})
			start := time.Now()
			cgConcurrent(t, h, n)

			sends := h.sends.instants("/pods/c-")
			require.Len(t, sends, n)
			assert.Equal(t, int32(n-limit), h.store.deferred.Load(), "all but the first %d were deferred", limit)
			require.Equal(t, n, h.store.decisions.Len(), "one decision a request")
			cgWindowHolds(t, h, limit, span)
			assert.GreaterOrEqual(t, sends[n-1].Sub(start), 2*span, "three timespans of sends")
			cgSentAfterSlot(t, h)
			assert.Equal(t, n, h.srv.Count("/pods/c-"))
		})
	}
}

// The linear strategy spaces requests one interval apart.
func TestClientGoLinearSpacing(t *testing.T) {
	const (
		n        = 6
		interval = 100 * time.Millisecond
		tol      = 40 * time.Millisecond
	)
	h := cgNew(t, limiter.Options{Policy: store.Policy{Strategy: store.StrategyLinear, Limit: 10, Timespan: time.Second, Burst: 1}})
	cgConcurrent(t, h, n)

	sends := h.sends.instants("/pods/c-")
	require.Len(t, sends, n)
	for i := 1; i < n; i++ {
		assert.GreaterOrEqual(t, sends[i].Sub(sends[i-1]), interval-tol, "sends %d and %d", i-1, i)
	}
	assert.GreaterOrEqual(t, sends[n-1].Sub(sends[0]), time.Duration(n-1)*interval-tol)
	assert.Equal(t, int32(n-1), h.store.deferred.Load())
	cgSentAfterSlot(t, h)
}

// Jitter spreads each deferred request by at most the configured jitter:
// it must not pile up along the queue. With a window of 20 per 400ms, the
// second 20 of 40 concurrent requests are due one timespan after the first
// 20, each plus its own jitter of up to 50ms, so all of them are sent
// within span + jitter of the first send (with tol for scheduling). Jitter
// that piles up adds about 20 × 25ms.
func TestClientGoJitterDoesNotAccumulate(t *testing.T) {
	const (
		n      = 40
		limit  = 20
		span   = 400 * time.Millisecond
		jitter = 50 * time.Millisecond
		tol    = 100 * time.Millisecond
	)
	h := cgNew(t, limiter.Options{Policy: cgWindow(limit, span), Jitter: jitter})
	cgConcurrent(t, h, n)

	sends := h.sends.instants("/pods/c-")
	require.Len(t, sends, n)
	require.Equal(t, n, h.store.decisions.Len(), "one decision a request")
	cgWindowHolds(t, h, limit, span)
	assert.LessOrEqual(t, sends[n-1].Sub(sends[0]), span+jitter+tol,
		"the last deferred request was sent %v after the first request", sends[n-1].Sub(sends[0]))
}

// A server's 429 cools the budget down whatever request it answers, also
// an exempt one: the server is throttling this client all the same (the
// Transport's documentation: "a 429, or a 503 with Retry-After, that is not
// the response of a proxy subresource cools the whole budget down").
func TestClientGoThrottledExemptRequestCoolsDown(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		path string
	}{
		{"WithoutLimit", k8sratelimit.WithoutLimit(context.Background()), "/api/v1/namespaces/default/pods/x"},
		{"lease", context.Background(), "/apis/coordination.k8s.io/v1/namespaces/default/leases/leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := cgNew(t, limiter.Options{Policy: cgWindow(100, time.Hour), Adaptive: true})
			cgThrottleOnce(h.srv, "/", http.StatusTooManyRequests, http.Header{"Retry-After": {"30"}})
			resp, _, err := h.rawGet(tt.ctx, tt.path, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.Zero(t, h.store.reserves.Load(), "the request itself stays exempt")
			assert.Greater(t, h.storeCooldown(t), 20*time.Second, "the 429 started a cooldown")
			assert.Equal(t, []harness.Throttle{{Code: http.StatusTooManyRequests, Cooldown: 30 * time.Second}}, h.obs.Throttles(), "the 429 was reported")
		})
	}
}
