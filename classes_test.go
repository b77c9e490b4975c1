package k8sratelimit_test

// The traffic classes at the wire: real client-go clientsets through one
// budget against the simulated API server, which records when each
// request arrived. Each test runs the same load with the classes on and
// off, and checks that the difference is the classes'.

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
)

// classRun is one run of a storm of lists with writes in it.
type classRun struct {
	writes   []time.Duration // from each write's call to its arrival at the server
	arrivals []time.Time     // every counted request's arrival
}

// stormWithWrites runs listers workers listing pods through a budget of
// cfg against api, and once the storm has run for settle, writers
// workers that update a pod once each; it returns how long each write
// took to reach the server, and when every request arrived.
func stormWithWrites(t *testing.T, api *apisim.Server, cfg k8sratelimit.Config, listers, writers int, settle time.Duration) classRun {
	t.Helper()
	l, err := k8sratelimit.New(cfg)
	require.NoError(t, err)
	defer l.Close()
	rc := &rest.Config{Host: api.URL}
	require.NoError(t, l.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	ctx, stop := context.WithCancel(context.Background())
	var storm sync.WaitGroup
	for range listers {
		storm.Go(func() {
			for ctx.Err() == nil {
				_, _ = cs.CoreV1().Pods("storm").List(ctx, metav1.ListOptions{})
			}
		})
	}
	hold(settle)
	called := make([]time.Time, writers)
	var writes sync.WaitGroup
	for i := range writers {
		writes.Go(func() {
			called[i] = time.Now()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w" + string(rune('a'+i)), Namespace: "work"}}
			_, err := cs.CoreV1().Pods("work").Update(context.Background(), pod, metav1.UpdateOptions{})
			assert.NoError(t, err)
		})
	}
	writes.Wait()
	stop()
	storm.Wait()

	var run classRun
	for _, r := range api.Requests() {
		run.arrivals = append(run.arrivals, r.At)
		if r.Method == "PUT" {
			i := int(r.Path[len(r.Path)-1] - 'a')
			run.writes = append(run.writes, r.At.Sub(called[i]))
		}
	}
	require.Len(t, run.writes, writers, "every write reached the server")
	slices.Sort(run.writes)
	return run
}

// A budget of 20 a second with 40 workers listing has a queue of two
// seconds. With classes, a write takes the next slot that comes, within a
// timespan; without, it waits behind the queue. The budget stays exact
// either way: the classes only trade slots the store gave.
func TestClassesLetWritesPassAQueueOfListsAtTheWire(t *testing.T) {
	const limit, span = 20, time.Second
	run := func(t *testing.T, off bool) classRun {
		api := cfgServer(t)
		cfg := k8sratelimit.DefaultConfig()
		cfg.Limit, cfg.Timespan, cfg.Adaptive, cfg.Concurrency, cfg.ClassesOff = limit, span, false, k8sratelimit.ConcurrencyOff, off
		r := stormWithWrites(t, api, cfg, 2*limit, 5, 1500*time.Millisecond)
		wireHolds(t, "all requests", r.arrivals, limit, span)
		return r
	}
	on := run(t, false)
	off := run(t, true)
	t.Logf("writes reached the server after: with classes %v; without %v", on.writes, off.writes)
	assert.LessOrEqual(t, on.writes[len(on.writes)-1], span+span/10,
		"with classes, every write is sent in the next timespan's slots")
	assert.Greater(t, off.writes[len(off.writes)/2], span+span/2,
		"without classes, writes wait behind the lists (else this test proves nothing)")
}

// With a concurrency limit of 2 seats, each request served in 100ms, and
// 20 workers listing, the seats have a queue of a second. With classes, a
// write takes one of the next seats given back; without, it waits behind
// the queue.
func TestClassesLetWritesPassAQueueForSeatsAtTheWire(t *testing.T) {
	const service = 100 * time.Millisecond
	run := func(t *testing.T, off bool) classRun {
		api := cfgServer(t)
		api.SetCapacity(64, 0, service)
		cfg := k8sratelimit.DefaultConfig()
		cfg.Limit, cfg.Timespan, cfg.Adaptive, cfg.Concurrency, cfg.ClassesOff = 10000, time.Second, false, 2, off
		r := stormWithWrites(t, api, cfg, 20, 2, time.Second)
		assert.LessOrEqual(t, api.MostInFlight("/api/v1/namespaces/storm/pods")+api.MostInFlight("/api/v1/namespaces/work/pods/wa")+
			api.MostInFlight("/api/v1/namespaces/work/pods/wb"), 2+2, "seats are held")
		return r
	}
	on := run(t, false)
	off := run(t, true)
	t.Logf("writes reached the server after: with classes %v; without %v", on.writes, off.writes)
	assert.LessOrEqual(t, on.writes[len(on.writes)-1], 4*service,
		"with classes, the writes take the next seats given back")
	assert.Greater(t, off.writes[0], 6*service,
		"without classes, writes wait behind the lists (else this test proves nothing)")
}

// An event gives way first: during a cooldown it is refused at once,
// naming its class, where a write waits the cooldown out.
func TestEventsAreRefusedAtOnceDuringACooldown(t *testing.T) {
	api := cfgServer(t)
	l, err := k8sratelimit.New(k8sratelimit.DefaultConfig())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	rc := &rest.Config{Host: api.URL}
	require.NoError(t, l.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	b, err := l.Budget("", rc)
	require.NoError(t, err)
	_, err = b.SetCooldown(context.Background(), 2*time.Second) // as a server's 429 would
	require.NoError(t, err)

	start := time.Now()
	_, err = cs.CoreV1().Events("work").Create(context.Background(), &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})
	var rle *rlerrors.RateLimitExceededError
	require.ErrorAs(t, err, &rle, "the event is refused")
	assert.Less(t, time.Since(start), 500*time.Millisecond, "at once")
	assert.Equal(t, "event", rle.Class)
	assert.Equal(t, rlerrors.WaitingForCooldown, rle.WaitingFor)
	assert.Contains(t, rle.Error(), "next event slot")

	_, err = cs.CoreV1().Pods("work").Update(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.UpdateOptions{})
	require.NoError(t, err, "a write waits the cooldown out")
	assert.Greater(t, time.Since(start), time.Second)
	assert.Zero(t, api.Count("/events"), "no event reached the server")
}
