package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// The simulated API server's capacity, like one API Priority and Fairness
// priority level that rejects instead of queueing: 8 seats, 25ms of work
// per request: at most about 320 requests a second, and a ninth request in
// flight is rejected with 429.
const (
	simSeats   = 8
	simQueue   = 0
	simService = 25 * time.Millisecond
)

// demoOptions are the demo's flags.
type demoOptions struct {
	runFlags
	compare bool
}

func parseDemoFlags(args []string, stderr io.Writer) (demoOptions, error) {
	o := demoOptions{runFlags: runFlags{workers: 50, duration: 8 * time.Second, limit: 20, timespan: 100 * time.Millisecond}}
	fs := newFlagSet("demo", "Runs a load against a simulated API server (8 seats; a ninth request in flight is\nanswered 429) through the limiter configured from the environment, and ends with\na table of what happened. -compare runs the same load without it, side by side.", stderr)
	o.register(fs)
	fs.BoolVar(&o.compare, "compare", false, "also run the same load through k8sratelimit with the concurrency limit off and with the traffic classes off, with client-go's default limiter, and with no limiter, side by side")
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	return o, o.parsed(fs)
}

// demoMode is one way of running the load: its name and how it sets up
// rc. setup returns where the instants the client-side limiter lets
// requests go are recorded, or nil to take those of the transport.
type demoMode struct {
	name  string
	setup func(rc *rest.Config, st *stats) (released *instants, cleanup func(), err error)
}

// demoCmd runs the demo: a simulated API server that enforces its own
// capacity with 429 + Retry-After, driven by many workers through the
// limiter configured from the environment (limit and timespan from the
// flags), and optionally through client-go's default limiter and none.
func demoCmd(args, environ []string, stdout, stderr io.Writer) int {
	o, err := parseDemoFlags(args, stderr)
	if err != nil {
		return parseError("demo", err, stderr)
	}
	cfg, err := o.config(environ)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit: %v\n", err)
		return 2
	}

	modes := demoModes(o, cfg)

	fmt.Fprintf(stdout, "Simulated API server: %d seats, %d queued, %v per request (about %d requests/s); excess answered 429, Retry-After: 1.\n",
		simSeats, simQueue, simService, int(time.Second/simService)*simSeats)
	fmt.Fprintf(stdout, "Load: %d workers, each with its own clientset, for %v: one in ten updates a pod, one in ten writes events, the others list pods.\n", o.workers, o.duration)
	fmt.Fprintf(stdout, "Budget: %d requests per %v (%s strategy, max wait %s).\n\n", cfg.Limit, cfg.Timespan, cfg.Strategy, maxWaitText(cfg))

	var results []demoResult
	for _, m := range modes {
		r, err := runDemoMode(m, o, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "kube-ratelimit demo: %s: %v\n", m.name, err)
			return 1
		}
		results = append(results, r)
	}
	fmt.Fprintln(stdout)
	writeReport(stdout, results, cfg.Limit, cfg.Timespan)
	return 0
}

// stormCall returns worker i's call in the demo's load: one worker in
// ten updates a pod, as a reconciler does, one in ten writes an event, as
// its recorder does, and the others list pods, as relisting informers do.
func stormCall(i int) func(ctx context.Context, cs kubernetes.Interface) error {
	switch i % 10 {
	case 0:
		return updatePod
	case 1:
		return writeEvent
	}
	return listPods
}

// updatePod updates a pod.
func updatePod(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Pods("default").Update(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}}, metav1.UpdateOptions{})
	return err
}

// writeEvent writes an event.
func writeEvent(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-", Namespace: "default"}}, metav1.CreateOptions{})
	return err
}

// demoModes returns the ways to run the load: through k8sratelimit with
// cfg, then (with -compare) with its concurrency limit off, with its
// traffic classes off, with client-go's default limiter and with none.
func demoModes(o demoOptions, cfg k8sratelimit.Config) []demoMode {
	through := func(cfg k8sratelimit.Config) func(rc *rest.Config, st *stats) (*instants, func(), error) {
		return func(rc *rest.Config, st *stats) (*instants, func(), error) {
			rec := &releaseRecorder{Store: memorystore.New(nil), stats: st}
			l, err := k8sratelimit.New(cfg, k8sratelimit.WithObserver(st), k8sratelimit.WithStore(rec))
			if err != nil {
				return nil, nil, err
			}
			st.watchSeats(l, rc)
			return &rec.instants, func() { l.Close() }, l.Configure(rc)
		}
	}
	modes := []demoMode{{"k8sratelimit", through(cfg)}}
	if o.compare {
		rateOnly := cfg
		rateOnly.Concurrency, rateOnly.MaxConcurrency = k8sratelimit.ConcurrencyOff, 0
		oneLine := cfg
		oneLine.ClassesOff, oneLine.ClassWeights = true, k8sratelimit.ClassWeights{}
		modes = append(modes,
			demoMode{"concurrency off", through(rateOnly)},
			demoMode{"classes off", through(oneLine)},
			demoMode{"client-go default", func(*rest.Config, *stats) (*instants, func(), error) { return nil, func() {}, nil }},
			demoMode{"no limiter", func(rc *rest.Config, _ *stats) (*instants, func(), error) {
				rc.QPS = -1
				return nil, func() {}, nil
			}},
		)
	}
	return modes
}

func maxWaitText(cfg k8sratelimit.Config) string {
	if cfg.MaxWait == nil {
		return "none"
	}
	return cfg.MaxWait.String()
}

// runDemoMode runs the load once, on a fresh simulated server.
func runDemoMode(m demoMode, o demoOptions, stdout io.Writer) (demoResult, error) {
	srv := apisim.New()
	defer srv.Close()
	srv.SetCapacity(simSeats, simQueue, simService)

	rc := &rest.Config{Host: srv.URL}
	rec := &sendRecorder{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	st := &stats{}
	released, cleanup, err := m.setup(rc, st)
	if err != nil {
		return demoResult{}, err
	}
	defer cleanup()
	if released == nil {
		released = &rec.instants
	}

	p := newProgress(stdout, m.name, o.duration)
	err = runLoad(context.Background(), rc, loadSpec{workers: o.workers, duration: o.duration, callOf: stormCall}, st,
		func(start, now time.Time) {
			p.update(now, now.Sub(start), snapshotOf(st, start, now, int64(srv.Rejected())))
		}, p.interval())
	p.done()
	if err != nil {
		return demoResult{}, err
	}
	return demoResult{
		name:       m.name,
		limited:    st.seats != nil,
		stats:      st,
		serverSeen: len(srv.Requests()),
		throttled:  srv.Rejected(),
		released:   released,
		maxSent:    released.mostInWindow(o.timespan - windowSlack(o.timespan)),
		maxWindow:  srv.MaxInWindow(o.timespan),
	}, nil
}

// progress shows a run's progress: a refreshing status line on a
// terminal, a plain line every two seconds otherwise. While no call
// finishes and the next slot of the budget is known, it says so instead
// of the counts; as plain lines, it says each thing once rather than
// repeating the same line.
type progress struct {
	w        io.Writer
	name     string
	total    time.Duration
	terminal bool

	last string    // the counts of the last line that showed them
	slot time.Time // the slot the last waiting line named
}

// snapshot is what a progress line shows.
type snapshot struct {
	calls, throttled, inProgress int64
	// idle is how long since a call last ended.
	idle time.Duration
	// nextSlot is the next instant the budget lets a waiting call go, or
	// zero when none is known.
	nextSlot time.Time
	// seatLimit is the concurrency limit, as learned so far (0: none).
	seatLimit int
}

// snapshotOf reads st at now, for a run that started at start, with
// throttled the 429s to show.
func snapshotOf(st *stats, start, now time.Time, throttled int64) snapshot {
	s := snapshot{calls: st.calls.Load(), throttled: throttled, inProgress: st.inProgress.Load()}
	s.idle = now.Sub(start)
	if last := st.lastEnd.Load(); last != 0 {
		s.idle = now.Sub(time.Unix(0, last))
	}
	s.nextSlot, _ = st.nextSlot(now)
	s.seatLimit = st.seatStatus().Limit
	return s
}

func newProgress(w io.Writer, name string, total time.Duration) *progress {
	return &progress{w: w, name: name, total: total, terminal: isTerminal(w)}
}

func (p *progress) interval() time.Duration {
	if p.terminal {
		return 200 * time.Millisecond
	}
	return 2 * time.Second
}

// update shows s, elapsed into the run, at now.
func (p *progress) update(now time.Time, elapsed time.Duration, s snapshot) {
	const width = 20
	filled := min(int(float64(width)*elapsed.Seconds()/p.total.Seconds()), width)
	status := fmt.Sprintf("calls %6d  429s %5d  in progress %3d", s.calls, s.throttled, s.inProgress)
	if s.seatLimit > 0 {
		status += fmt.Sprintf("  concurrency limit %3d", s.seatLimit)
	}
	// Nothing ended for half an interval, and something waits for a slot.
	waiting := s.idle >= p.interval()/2 && s.nextSlot.After(now)
	if waiting {
		status = "waiting for the budget: next slot in " + roughly(s.nextSlot.Sub(now))
	}
	line := fmt.Sprintf("%-18s [%s%s] %4.1fs  %s",
		p.name, strings.Repeat("#", filled), strings.Repeat(".", width-filled), elapsed.Seconds(), status)
	if p.terminal {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		return
	}
	switch {
	case waiting && (s.nextSlot.Sub(p.slot)).Abs() < time.Second:
		return // said already (slots noted a moment apart are one slot)
	case !waiting && status == p.last:
		return // nothing happened
	}
	if waiting {
		p.slot = s.nextSlot
	} else {
		p.last = status
	}
	fmt.Fprintln(p.w, line)
}

// roughly formats d to a tenth of a second below 10s, to the second above.
func roughly(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func (p *progress) done() {
	if p.terminal {
		fmt.Fprintln(p.w)
	}
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
