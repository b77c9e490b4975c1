package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/probe"
)

// watchTimeoutSeconds makes the API server end each of the informer's
// watches after this long, so that the reflector re-opens it during the
// test.
const watchTimeoutSeconds = 2

// TestInformerThroughLimiter runs a shared informer factory through the
// limiter: it lists and watches, sees an object created after it synced,
// and each opening of its watch, re-openings included, is counted once.
func TestInformerThroughLimiter(t *testing.T) {
	ns := newNamespace(t)
	var decisions probe.Decisions
	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan = 100, time.Second
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithObserver(&decisions))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })

	rc := userConfig(userPlain)
	var wire probe.Wire
	rc.Wrap(wire.Wrap)
	require.NoError(t, l.Configure(rc))
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.TimeoutSeconds = ptr.To[int64](watchTimeoutSeconds)
		}))
	informer := factory.Core().V1().ConfigMaps().Informer()
	added := make(chan string, 16)
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				added <- cm.Name
			}
		},
	})
	require.NoError(t, err)
	ctx := withTimeout(t, time.Minute)
	stopCtx, stop := context.WithCancel(ctx)
	t.Cleanup(factory.Shutdown) // after stop: it waits for the informers to end
	t.Cleanup(stop)
	factory.Start(stopCtx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "seen-by-informer"}}
	_, err = suite.admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case name := <-added:
		assert.Equal(t, cm.Name, name)
	case <-ctx.Done():
		t.Fatal("the informer did not see the created config map")
	}

	// Wait for the API server to end the first watch and the reflector to
	// open another.
	require.Eventually(t, func() bool { return watchOpens(wire.Exchanges()) >= 2 },
		30*time.Second, 20*time.Millisecond, "the informer's watch was not re-opened")
	stop()
	factory.Shutdown() // every request is recorded once the informers have ended

	exchanges := wire.Exchanges()
	counts := decisions.Total()
	t.Logf("requests sent: %d (%d watch openings); limiter: %d admitted, %d exempt", len(exchanges), watchOpens(exchanges), counts.Admitted, counts.Exempt)
	for _, e := range exchanges {
		t.Logf("%s %s?%s", e.Method, e.Path, e.Query)
		assert.Equal(t, "GET", e.Method, "the informer only lists and watches: %s %s", e.Method, e.Path)
	}
	assert.Equal(t, len(exchanges), counts.Admitted, "each request, each watch opening included, counts once")
	assert.Zero(t, counts.Exempt)
	assert.Zero(t, counts.Rejected)
}

// watchOpens returns how many of exchanges opened a watch.
func watchOpens(exchanges []probe.Exchange) int {
	n := 0
	for _, e := range exchanges {
		if e.Watch {
			n++
		}
	}
	return n
}
