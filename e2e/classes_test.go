package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/probe"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// The storm of the traffic classes' runs: a reconciler that reads and
// updates stormObjects ConfigMaps at stormReconciles a second, stormListers
// workers relisting them, an event recorder asked for stormEvents events
// a second, and leader election, through one budget of stormLimit a
// second, on a level of about 6 seats that rejects, for stormRun. Which
// of the rate and the seats binds depends on the machine: with the race
// detector the client is slow enough that the seats do; the classes
// share both.
const (
	stormObjects    = 200
	stormReconciles = 20
	stormListers    = 40
	stormEvents     = 200
	stormLimit      = 100
	stormRun        = 30 * time.Second
)

// stormResult is what one run of the storm measured.
type stormResult struct {
	name           string
	writes         []time.Duration // each reconciler write's call, from its start to its answer
	writesTried    int
	writesServed   int
	eventsRefused  int // refused by the limiter
	eventsSent     int // event writes that reached the server
	lostLeadership bool
	waited         *writeWaits // the writes that waited in the limiter, by what for
	served                     // at the wire: every request
}

// writeWaits records how long the writes that waited in the limiter
// waited, by what they waited for. It is a limiter.Observer.
type writeWaits struct {
	limiter.NopObserver
	mu    sync.Mutex
	waits map[limiter.WaitReason][]time.Duration
}

func (w *writeWaits) Admitted(_, _ string, c limiter.Class, wait time.Duration, reason limiter.WaitReason) {
	if c != limiter.ClassWrite || wait == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waits == nil {
		w.waits = map[limiter.WaitReason][]time.Duration{}
	}
	w.waits[reason] = append(w.waits[reason], wait)
}

// String returns how many writes waited for each reason, and the longest.
func (w *writeWaits) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for _, r := range []limiter.WaitReason{limiter.WaitSeat, limiter.WaitBudget, limiter.WaitCooldown} {
		if d := w.waits[r]; len(d) > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (longest %v)", r, len(d), slices.Max(d).Round(time.Millisecond)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// writeAt returns the q-th quantile of the writes' calls.
func (r stormResult) writeAt(q float64) time.Duration {
	if len(r.writes) == 0 {
		return 0
	}
	w := slices.Sorted(slices.Values(r.writes))
	return w[max(min(int(q*float64(len(w))+0.5), len(w))-1, 0)]
}

func (r stormResult) writeP99() time.Duration { return r.writeAt(0.99) }

// TestTrafficClassesUnderAStorm runs the reconciler alone, then beside a
// storm of relists and events with the traffic classes on, then off: with
// them, the reconciler keeps up and nine writes in ten take one of the
// next slots and seats that come, where without them they wait behind the
// relists and the reconciler falls behind; the storm is not starved, 429s
// stay rare, and leader election never misses a renewal.
func TestTrafficClassesUnderAStorm(t *testing.T) {
	seats, err := suite.throttles[userClasses].NominalSeats(t.Context(), suite.admin)
	require.NoError(t, err)
	ns := newNamespace(t)
	createConfigMaps(t, ns, stormObjects, 1000)

	alone := runStorm(t, ns, "reconciler alone", false, false)
	on := runStorm(t, ns, "storm, classes on", true, false)
	off := runStorm(t, ns, "storm, classes off", true, true)
	t.Logf("traffic classes: a priority level of %d seats that rejects, a budget of %d a second, %s each:\n%s", seats, stormLimit, stormRun, stormTable(alone, on, off))
	t.Logf("traffic classes: write p99 with the storm, classes on, %.1f× alone's", float64(on.writeP99())/float64(max(alone.writeP99(), 1)))

	assert.False(t, alone.lostLeadership || on.lostLeadership || off.lostLeadership, "leader election never misses a renewal")
	// Measured with the race detector: with classes, 98-99 % of the
	// writes the reconciler makes alone; without, 24-34 %.
	assert.GreaterOrEqual(t, float64(on.writesTried), 0.9*float64(alone.writesTried), "with classes, the reconciler keeps up")
	assert.Less(t, float64(off.writesTried), 0.8*float64(alone.writesTried), "without classes, the reconciler falls behind (else this test proves nothing)")
	assert.GreaterOrEqual(t, float64(on.writesServed), 0.95*float64(on.writesTried), "with classes, 95 %% of the reconciler's writes are served")
	// Measured: p50 10-32ms with classes, 250-600ms without (3ms alone);
	// p90 46-127ms with classes, 0.64-1.27s without. The slowest writes
	// are those a 429's cooldown stopped, with every other request of the
	// budget, for a second or more, and those queued behind them: the p99
	// (0.85-1.01s) is reported, not asserted.
	assert.Less(t, on.writeAt(0.5), off.writeAt(0.5)/4, "with classes, the writes wait a fraction of what they wait without")
	assert.LessOrEqual(t, on.writeAt(0.9), 300*time.Millisecond, "with classes, nine writes in ten take one of the next slots and seats that come")
	// Measured: with classes, the storm was served 98-155 % of what it was
	// without in 13 runs of 14, and 80 % in one: there the relists waited
	// behind the reconciler for seats, and cooldowns, every one a pause of
	// the whole budget, came as often as without. One run of 30 s against
	// another varies that much; the bound is for a storm the classes starve.
	assert.GreaterOrEqual(t, float64(on.served.served), 0.7*float64(off.served.served), "with classes, the storm is not starved")
	assert.LessOrEqual(t, on.throttledShare(), 0.01, "429s are at most 1 %% of the requests sent")
}

// runStorm runs the reconciler and leader election, with storm the
// relists and the events too, through a fresh limiter (classes off when
// off) for stormRun.
func runStorm(t *testing.T, ns, name string, storm, off bool) stormResult {
	t.Helper()
	waitSeatsFree(t, userClasses)
	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan, cfg.ClassesOff = stormLimit, time.Second, off
	r := stormResult{name: name, waited: &writeWaits{}}
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithObserver(r.waited))
	require.NoError(t, err)
	defer l.Close()
	rc := userConfig(userClasses)
	var wire probe.Wire
	rc.Wrap(wire.Wrap)
	require.NoError(t, l.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), stormRun)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { r.lostLeadership = elect(ctx, cs, ns, name) })
	if storm {
		wg.Go(func() { relist(ctx, cs, ns) })
		wg.Go(func() { r.eventsRefused = recordEvents(ctx, cs, ns) })
	}
	r.writes, r.writesTried, r.writesServed = reconcileConfigMaps(ctx, cs, ns)
	wg.Wait()
	r.served = countServed(wire.Exchanges(), 0, start)
	for _, e := range wire.Exchanges() {
		if strings.Contains(e.Path, "/events") && e.Status != 0 {
			r.eventsSent++
		}
	}
	t.Logf("%s: writes %d of %d served, p90 %v, p95 %v, p99 %v, waited in the limiter: %s; %d served, %d of %d sent answered 429 %v; events sent %d, refused %d; leadership lost: %v",
		name, r.writesServed, r.writesTried, r.writeAt(0.9), r.writeAt(0.95), r.writeP99(), r.waited, r.served.served, r.throttled, r.sent, r.throttles, r.eventsSent, r.eventsRefused, r.lostLeadership)
	return r
}

// reconcileConfigMaps queues a reconcile of a ConfigMap stormReconciles
// times a second, and has a few workers read and update them, as a
// controller's work queue and workers do, until ctx ends; it returns how
// long each write call took, and how many were made and served. The queue
// keeps what the workers have not reached (a cooldown stops them all for a
// second or more), as a work queue does, so they catch up after it.
func reconcileConfigMaps(ctx context.Context, cs kubernetes.Interface, ns string) (writes []time.Duration, tried, served int) {
	work := make(chan int, stormReconciles*int(stormRun/time.Second))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				name := configMapName(i % stormObjects)
				cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				cm.Data["n"] = fmt.Sprint(i)
				begin := time.Now()
				_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
				took := time.Since(begin)
				if ctx.Err() != nil {
					return // cut off by the end of the run
				}
				mu.Lock()
				tried++
				writes = append(writes, took)
				if err == nil {
					served++
				}
				mu.Unlock()
			}
		})
	}
	tick := time.NewTicker(time.Second / stormReconciles)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			close(work)
			wg.Wait()
			return writes, tried, served
		case <-tick.C:
			work <- i // the queue holds the whole run's
		}
	}
}

// relist has stormListers workers list the ConfigMaps of ns until ctx
// ends, as relisting informers do.
func relist(ctx context.Context, cs kubernetes.Interface, ns string) {
	var wg sync.WaitGroup
	for range stormListers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
				requeueAfter(ctx, err)
			}
		})
	}
	wg.Wait()
}

// recordEvents asks client-go's event recorder for stormEvents events a
// second, each about one of the ConfigMaps in turn, until ctx ends, and
// returns how many event writes the limiter refused.
func recordEvents(ctx context.Context, cs kubernetes.Interface, ns string) int {
	var refused atomic.Int64
	sink := &refusalCounter{EventSink: &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(ns)}, refused: &refused}
	b := record.NewBroadcaster(record.WithContext(ctx))
	defer b.Shutdown()
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "k8sratelimit-storm"})
	tick := time.NewTicker(time.Second / stormEvents)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return int(refused.Load())
		case <-tick.C:
			ref := &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: configMapName(i % stormObjects)}
			rec.Eventf(ref, corev1.EventTypeNormal, "Storm", "storm event %d", i)
		}
	}
}

// refusalCounter is an event sink that counts the event writes the
// limiter refuses.
type refusalCounter struct {
	record.EventSink
	refused *atomic.Int64
}

func (c *refusalCounter) Create(e *corev1.Event) (*corev1.Event, error) {
	return c.count(c.EventSink.Create(e))
}

func (c *refusalCounter) Update(e *corev1.Event) (*corev1.Event, error) {
	return c.count(c.EventSink.Update(e))
}

func (c *refusalCounter) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return c.count(c.EventSink.Patch(e, data))
}

func (c *refusalCounter) count(e *corev1.Event, err error) (*corev1.Event, error) {
	var rle *rlerrors.RateLimitExceededError
	if errors.As(err, &rle) {
		c.refused.Add(1)
	}
	return e, err
}

// elect runs leader election on a lease of ns until ctx ends, and reports
// whether the leadership was lost before.
func elect(ctx context.Context, cs kubernetes.Interface, ns, id string) (lost bool) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: "storm-leader", Namespace: ns},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	var led atomic.Bool
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { led.Store(true) },
			OnStoppedLeading: func() { lost = ctx.Err() == nil },
		},
	})
	return lost || !led.Load()
}

// stormTable returns the runs' figures as a table.
func stormTable(runs ...stormResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %-20s | %-13s | %-9s | %-9s | %-9s | %-7s | %-12s | %-21s |\n", "run", "writes served", "write p50", "write p99", "write max", "served", "429s / sent", "events sent / refused")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %-20s | %-13s | %-9v | %-9v | %-9v | %-7d | %-12s | %-21s |\n", r.name, fmt.Sprintf("%d of %d", r.writesServed, r.writesTried),
			r.writeAt(0.5).Round(time.Millisecond), r.writeP99().Round(time.Millisecond), r.writeAt(1).Round(time.Millisecond),
			r.served.served, fmt.Sprintf("%d / %d", r.throttled, r.sent), fmt.Sprintf("%d / %d", r.eventsSent, r.eventsRefused))
	}
	return b.String()
}
