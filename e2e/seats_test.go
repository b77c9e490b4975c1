package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/probe"
	"github.com/k8sratelimit/k8sratelimit/internal/childproc"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// The seats runs: seatsWorkers workers list namespaces in a loop for
// seatsRun, as a controller's workers would.
const (
	seatsWorkers = 40
	seatsRun     = 15 * time.Second
	defaultRun   = 30 * time.Second
)

// served is what one run got from the API server.
type served struct {
	name      string
	served    int // 2xx answers
	sent      int // requests that left, retries included
	throttled int // 429s
	limit     int // the concurrency limit at the end (0: none)
	// throttles are the first 429s, each as when it was sent into the
	// run and the requests of this client in flight then, itself included.
	throttles []string
}

func (s served) throttledShare() float64 { return float64(s.throttled) / float64(max(s.sent, 1)) }

// plus returns s with o's counts added, and o's limit at the end.
func (s served) plus(o served) served {
	s.served += o.served
	s.sent += o.sent
	s.throttled += o.throttled
	s.limit = o.limit
	return s
}

// farAboveTheServer is a configuration whose rate budget is far above what
// a priority level of a few seats can serve, so that only the concurrency
// limit matters.
func farAboveTheServer() *k8sratelimit.Config {
	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan = k8sratelimit.MaxWindowLimit, time.Second
	return &cfg
}

// loadClient is a clientset of one user, through a limiter or none, with
// the requests that left it recorded below the limiter.
type loadClient struct {
	name    string
	user    string
	workers int
	cs      kubernetes.Interface
	wire    probe.Wire
	l       *k8sratelimit.Limiter
	rc      *rest.Config
	total   served
}

// newLoadClient returns a client of user whose workers go through a
// limiter of cfg (none when nil).
func newLoadClient(t *testing.T, name, user string, workers int, cfg *k8sratelimit.Config) *loadClient {
	t.Helper()
	c := &loadClient{name: name, user: user, workers: workers, rc: userConfig(user)}
	c.rc.Wrap(c.wire.Wrap) // below the limiter: sees what actually leaves
	if cfg != nil {
		var err error
		c.l, err = k8sratelimit.New(*cfg)
		require.NoError(t, err)
		t.Cleanup(func() { c.l.Close() })
		require.NoError(t, c.l.Configure(c.rc))
	}
	var err error
	c.cs, err = kubernetes.NewForConfig(c.rc)
	require.NoError(t, err)
	c.total.name = name
	return c
}

// run runs the client's workers listing namespaces for d and adds what
// left and what was served to its total.
func (c *loadClient) run(t *testing.T, d time.Duration) served {
	t.Helper()
	waitSeatsFree(t, c.user)
	s := c.load(d)
	if c.l != nil {
		b, err := c.l.Budget("", c.rc)
		require.NoError(t, err)
		s.limit = b.Seats().Limit
	}
	t.Logf("%s: %d served, %d of %d sent answered 429 (sent at:in flight %v), concurrency limit at the end %d",
		c.name, s.served, s.throttled, s.sent, s.throttles, s.limit)
	c.total = c.total.plus(s)
	return s
}

// load runs the client's workers listing namespaces for d and counts what
// left and what was served. A worker refused by the limiter waits for the
// error's RetryAfter before it lists again, as a controller requeues: one
// that lists again at once spins, and takes the API server's cores.
func (c *loadClient) load(d time.Duration) served {
	before := len(c.wire.Exchanges())
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
				requeueAfter(ctx, err)
			}
		})
	}
	wg.Wait()

	s := countServed(c.wire.Exchanges(), before, start)
	s.name = c.name
	return s
}

// waitSeatsFree waits until the API server runs none of user's requests:
// those of a run before, cancelled when it ended, hold their seats until
// the server notices, and a run that starts meanwhile would learn fewer
// seats than the level has.
func waitSeatsFree(t *testing.T, user string) {
	t.Helper()
	th, ok := suite.throttles[user]
	if !ok {
		return
	}
	level := `priority_level="` + th.PriorityLevel.Name + `"`
	require.Eventually(t, func() bool {
		raw, err := suite.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
		require.NoError(t, err)
		for line := range strings.SplitSeq(string(raw), "\n") {
			if strings.HasPrefix(line, "apiserver_flowcontrol_current_executing_seats{") && strings.Contains(line, level) &&
				!strings.HasSuffix(line, " 0") {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the requests of the run before finish in the server")
}

// compare runs the clients in turn, rounds times each for d, so that the
// machine's load falls on all alike, and returns their totals.
func compare(t *testing.T, rounds int, d time.Duration, clients ...*loadClient) []served {
	t.Helper()
	for range rounds {
		for _, c := range clients {
			c.run(t, d)
		}
	}
	var totals []served
	for _, c := range clients {
		totals = append(totals, c.total)
	}
	return totals
}

// servedTable sets runs side by side.
func servedTable(runs ...served) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-52s %10s %10s %10s %8s\n", "", "served", "sent", "429s", "limit")
	for _, r := range runs {
		fmt.Fprintf(&b, "%-52s %10d %10d %10d %8d\n", r.name, r.served, r.sent, r.throttled, r.limit)
	}
	return b.String()
}

// TestSeatsAgainstARejectingLevel drives a priority level of a few seats
// that rejects, in turns of seatsRun/2: one worker per seat with no
// limiter (the best possible), and seatsWorkers workers through one
// limiter whose rate budget is far above the server, with the concurrency
// limit adaptive (the default). Then once with the concurrency limit off,
// to show what it prevents.
func TestSeatsAgainstARejectingLevel(t *testing.T) {
	seats, err := suite.throttles[userSeats].NominalSeats(t.Context(), suite.admin)
	require.NoError(t, err)
	require.Positive(t, seats)

	runs := compare(t, 2, seatsRun/2,
		newLoadClient(t, fmt.Sprintf("%d workers (one per seat), no limiter", seats), userSeats, seats, nil),
		newLoadClient(t, fmt.Sprintf("%d workers, k8sratelimit, concurrency auto", seatsWorkers), userSeats, seatsWorkers, farAboveTheServer()))
	best, auto := runs[0], runs[1]
	off := farAboveTheServer()
	off.Concurrency = k8sratelimit.ConcurrencyOff
	// Last: the collapse it shows raises the level's Retry-After.
	rateOnly := newLoadClient(t, fmt.Sprintf("%d workers, k8sratelimit, concurrency off", seatsWorkers), userSeats, seatsWorkers, off).run(t, seatsRun)
	t.Logf("a priority level of %d seats that rejects, %s per client, rate budget %d per second:\n%s",
		seats, seatsRun, k8sratelimit.MaxWindowLimit, servedTable(best, auto, rateOnly))

	// The aim is 80%. Measured on one 2-core machine with the race
	// detector, otherwise idle: 85-93% over three runs (64-117% before a
	// seat given back just as a request queued stopped being lost, and
	// before limited slow start). The check guards the difference that
	// matters, against the collapse without the concurrency limit (well
	// under 1%), with room for a slower or busier machine.
	assert.GreaterOrEqual(t, float64(auto.served), 0.5*float64(best.served),
		"with adaptive concurrency, 40 workers are served at least half of what one worker per seat gets")
	assert.LessOrEqual(t, auto.throttledShare(), 0.01, "at most 1%% of the requests sent draw a 429")
	// A request of ours whose answer has arrived can still hold its seat in
	// the server for a moment, so a throttle can come with a seat or two
	// less in use on our side; a quick probe (a second after the cut's
	// cooldown) finds the seats from above, and the limit learned is the
	// seats, or one less when a later throttle came that way.
	assert.GreaterOrEqual(t, auto.limit, seats-1, "the limit learned is the level's seats, or one less")
	assert.LessOrEqual(t, auto.limit, seats, "the limit learned is the level's seats, or one less")
}

// TestSeatsDefaultConfiguration drives a rejecting level with the default
// configuration (400 per minute) for defaultRun: the rate budget decides
// how many are served, and hardly any request draws a 429.
func TestSeatsDefaultConfiguration(t *testing.T) {
	cfg := k8sratelimit.DefaultConfig()
	got := newLoadClient(t, fmt.Sprintf("%d workers, k8sratelimit, default configuration", seatsWorkers), userSeatsDflt, seatsWorkers, &cfg).run(t, defaultRun)
	allowed := cfg.Limit // one timespan (a minute) holds the whole run
	assert.GreaterOrEqual(t, float64(got.served), 0.9*float64(allowed), "at least 90%% of what the budget allows is served")
	assert.LessOrEqual(t, got.throttledShare(), 0.01, "at most 1%% of the requests sent draw a 429")
}

// TestSeatsAgainstAQueueingLevel drives a level that queues instead of
// rejecting, in turns: overload shows as latency, not 429s, and the
// limiter must serve as much as no limiter does.
func TestSeatsAgainstAQueueingLevel(t *testing.T) {
	runs := compare(t, 2, seatsRun/2,
		newLoadClient(t, fmt.Sprintf("%d workers, no limiter", seatsWorkers), userQueued, seatsWorkers, nil),
		newLoadClient(t, fmt.Sprintf("%d workers, k8sratelimit, concurrency auto", seatsWorkers), userQueued, seatsWorkers, farAboveTheServer()))
	none, auto := runs[0], runs[1]
	t.Logf("a priority level that queues, %s per client:\n%s", seatsRun, servedTable(none, auto))
	// The aim is 95%. Measured: 112-129% while other suites loaded the
	// machine, 92% when it was otherwise idle: the limiter's own CPU under
	// the race detector, on the two cores the API server also runs on.
	assert.GreaterOrEqual(t, float64(auto.served), 0.85*float64(none.served), "at least 85%% of what no limiter gets")
}

// runChildFor is runChild for the seats runs: workers list namespaces
// through lim (none when nil) for the duration d, and it prints "served
// <n> sent <n> throttled <n>", counted below the limiter.
func runChildFor(lim *k8sratelimit.Limiter, rc *rest.Config, workers int, d string) int {
	dur, err := time.ParseDuration(d)
	if err != nil {
		return childproc.Fail(err)
	}
	c := &loadClient{workers: workers, rc: rc, l: lim}
	rc.Wrap(c.wire.Wrap)
	if lim == nil {
		rc.QPS = -1 // nor client-go's own
		if c.cs, err = kubernetes.NewForConfig(rc); err != nil {
			return childproc.Fail(err)
		}
		s := c.load(dur)
		fmt.Printf("429s (sent at:in flight in this process) %v\nno limiter, CPU %.2fs, %s\n", s.throttles, ownCPU().Seconds(), c.wire.Timing())
		fmt.Printf("served %d sent %d throttled %d\n", s.served, s.sent, s.throttled)
		return 0
	}
	if err := lim.Configure(rc); err != nil {
		return childproc.Fail(err)
	}
	if c.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return childproc.Fail(err)
	}
	var changes []string
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		start, last := time.Now(), ""
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			b, err := lim.Budget("", rc)
			if err != nil {
				continue
			}
			st := b.Seats()
			now := fmt.Sprintf("%d/%d", st.Share, st.Limit)
			if now != last {
				changes = append(changes, fmt.Sprintf("%.2fs:%s", time.Since(start).Seconds(), now))
				last = now
			}
		}
	}()
	s := c.load(dur)
	close(done)
	<-sampled
	fmt.Printf("429s (sent at:in flight in this process) %v; share/limit %v\n", s.throttles, changes)
	if b, err := lim.Budget("", rc); err == nil {
		st := b.Seats()
		fmt.Printf("concurrency limit %d, this process's share %d, CPU %.2fs, %s\n", st.Limit, st.Share, ownCPU().Seconds(), c.wire.Timing())
	}
	fmt.Printf("served %d sent %d throttled %d\n", s.served, s.sent, s.throttled)
	return 0
}

// seatsChildren runs a child process per element of workers, with that
// many workers each, as user for d, sharing one budget of env through srv
// under owner, and returns their figures added up.
func seatsChildren(t *testing.T, name string, srv *redistest.Server, owner, user string, workers []int, d time.Duration, env ...string) served {
	t.Helper()
	waitSeatsFree(t, user)
	rc := suite.cp.UserConfig(user)
	env = slices.Concat(env, childproc.RedisBudget(srv.URL(), owner), childConn(rc), []string{childFor + "=" + d.String()})
	etcd, apiServer := suite.cp.Pids()
	cpu := meterCPU(t, []string{"kube-apiserver", "etcd", "redis-server"}, apiServer, etcd, srv.Pid())
	calls := meterRedis(t, srv)
	var children []*childproc.Process
	for i, w := range workers {
		children = append(children, childproc.Start(t, childEnv, fmt.Sprintf("%s-%d", user, i),
			append(slices.Clone(env), childWorkers+"="+strconv.Itoa(w))...))
	}
	total := served{name: name}
	for _, c := range children {
		out := c.Wait(t)
		var s served
		_, err := fmt.Sscanf(lastLine(out), "served %d sent %d throttled %d", &s.served, &s.sent, &s.throttled)
		require.NoError(t, err, "child %s: %s", c.Name, out)
		t.Logf("%s: %d served, %d of %d sent answered 429 (%s; %s)", c.Name, s.served, s.throttled, s.sent, secondLastLine(out), nthLastLine(out, 3))
		total = total.plus(s)
	}
	t.Logf("%s: CPU used meanwhile by %s; Redis ran %s", name, cpu.report(t), calls.report(t, total.sent))
	return total
}

// secondLastLine returns the line before the last of s.
func secondLastLine(s string) string { return nthLastLine(s, 2) }

// nthLastLine returns the n-th line of s from its end, "" when s has
// fewer.
func nthLastLine(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) < n {
		return ""
	}
	return lines[len(lines)-n]
}

// lastLine returns the last line of s that is not empty.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestSeatsSharedThroughRedis is TestSeatsAgainstARejectingLevel and
// TestSeatsDefaultConfiguration with the workers split between two OS
// processes that share the budget, and its concurrency limit, through a
// real redis-server.
func TestSeatsSharedThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	seats, err := suite.throttles[userSeatsRedis].NominalSeats(t.Context(), suite.admin)
	require.NoError(t, err)

	// The baselines run in halves, before and after the limited runs, in
	// mirrored order (one process, two processes | shared, fixed | two
	// processes, one process), so that the machine's load falls on all
	// alike; the limited processes run once, for the whole time, as
	// long-lived replicas would (each learns the limit anew when it
	// starts).
	baseline := newLoadClient(t, fmt.Sprintf("%d workers (one per seat), no limiter", seats), userSeatsRedis, seats, nil)
	// The same best split over two processes like the shared run's: what
	// two processes' own cost (two clients, two race detectors on the
	// API server's cores) leaves of it.
	bareRun := func() served {
		return seatsChildren(t, fmt.Sprintf("%d workers over 2 processes (one per seat), no limiter", seats),
			srv, "e2e-seats-bare", userSeatsRedis, []int{seats - seats/2, seats / 2}, seatsRun/2, childBare+"=1")
	}
	baseline.run(t, seatsRun/2)
	bare := bareRun()
	halves := []int{seatsWorkers / 2, seatsWorkers / 2}
	farAbove := []string{"KUBERNETES_RATELIMIT=" + strconv.Itoa(k8sratelimit.MaxWindowLimit), "KUBERNETES_RATELIMIT_TIMESPAN=second"}
	shared := seatsChildren(t, fmt.Sprintf("2 processes × %d workers, rate far above, concurrency auto", seatsWorkers/2),
		srv, "e2e-seats", userSeatsRedis, halves, seatsRun, farAbove...)
	// The shared run with the limit fixed at the level's seats: what the
	// store's path costs per request, with nothing to learn.
	fixed := seatsChildren(t, fmt.Sprintf("2 processes × %d workers, rate far above, concurrency %d fixed", seatsWorkers/2, seats),
		srv, "e2e-seats-fixed", userSeatsRedis, halves, seatsRun,
		slices.Concat(farAbove, []string{"KUBERNETES_RATELIMIT_CONCURRENCY=" + strconv.Itoa(seats)})...)
	bare = bare.plus(bareRun())
	baseline.run(t, seatsRun/2)
	best := baseline.total
	dflt := seatsChildren(t, fmt.Sprintf("2 processes × %d workers, default configuration", seatsWorkers/2),
		srv, "e2e-seats-default", userSeatsRedisDflt, halves, defaultRun)
	t.Logf("two processes sharing a budget through Redis, a level of %d seats that rejects:\n%s", seats, servedTable(best, bare, shared, fixed, dflt))
	t.Logf("shared: %.0f%% of one process's best, %.0f%% of two processes' best; with the limit fixed at the seats, %.0f%% of two processes' best",
		100*float64(shared.served)/float64(best.served), 100*float64(shared.served)/float64(bare.served), 100*float64(fixed.served)/float64(bare.served))

	// The aim is 80%. Learning the limit costs two cooldowns of a
	// second, as for one process: a throttle in slow start (one or two
	// 429s in its burst) and one at the quick probe of a fourth seat.
	// Measured on an idle 2-core machine without the race detector, with
	// the baselines balanced and the sends recorded in batches of a few
	// commands: 79-83% of one process's best over seven runs, 81.7% on
	// average; the limit fixed at the seats served 95-98% of two
	// processes' best with no 429; 0.12-0.13 Redis functions per request.
	// Before the batches, 71-80%; before seat waiters leased their slots,
	// 67-75%. Under the race detector, one run: 81% (67% before the
	// batches).
	// The checks guard against the collapse without a concurrency limit.
	assert.GreaterOrEqual(t, float64(shared.served), float64(best.served)/4, "at least a quarter of what one worker per seat gets")
	assert.LessOrEqual(t, shared.throttledShare(), 0.01, "at most 1%% of the requests sent draw a 429")
	assert.GreaterOrEqual(t, float64(fixed.served), float64(bare.served)/4, "with the limit fixed at the seats, at least a quarter of two processes' best")
	assert.LessOrEqual(t, fixed.throttledShare(), 0.01, "with the limit fixed at the seats, at most 1%% of the requests sent draw a 429")
	assert.GreaterOrEqual(t, float64(dflt.served), 0.9*400, "at least 90%% of what the default budget allows in %s", defaultRun)
	// Not the 1% one process keeps to: each process starting with the
	// budget may draw a 429 of its own in the first burst before the
	// other's cut reaches it; 1 to 7 of 400 were measured (0.25-1.75%),
	// 1 to 5 since.
	assert.LessOrEqual(t, dflt.throttledShare(), 0.03, "at most 3%% of the requests sent draw a 429")
}
