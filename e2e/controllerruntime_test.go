package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/cluster"
	"github.com/k8sratelimit/k8sratelimit/e2e/internal/probe"
)

// The controller-runtime test's settings.
const (
	reconcileObjects = 10
	reconcileLabel   = "k8sratelimit-e2e/reconcile"
	reconciledKey    = "reconciled"
	managerTimeout   = 2 * time.Minute
)

// TestControllerRuntimeManagerSharesOneBudget starts envtest over the
// suite's binaries and a manager with leader election configured with the
// limiter, and checks that the manager reconciles objects while its cache,
// its client and its leader election all go through one budget.
func TestControllerRuntimeManagerSharesOneBudget(t *testing.T) {
	ctrl.SetLogger(logr.Discard()) // the test checks outcomes; controller-runtime's logs are noise here
	env := &envtest.Environment{
		BinaryAssetsDirectory:    suite.binDir,
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	envConfig, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })
	direct, err := kubernetes.NewForConfig(envConfig)
	require.NoError(t, err)
	ctx := withTimeout(t, managerTimeout)
	ns, err := direct.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reconcile"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	var decisions probe.Decisions
	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit, cfg.Timespan = 50, time.Second
	l, err := k8sratelimit.New(cfg, k8sratelimit.WithObserver(&decisions))
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	mgrConfig := rest.CopyConfig(envConfig)
	var wire probe.Wire
	mgrConfig.Wrap(wire.Wrap)
	require.NoError(t, l.Configure(mgrConfig))

	mgr, reconciled := newReconcilingManager(t, mgrConfig, ns.Name)
	stopManager := startManager(ctx, mgr)
	t.Cleanup(func() { stopManager() })
	select {
	case <-mgr.Elected():
	case <-ctx.Done():
		t.Fatal("the manager was not elected leader")
	}

	names := createLabelledConfigMaps(t, ctx, direct, ns.Name)
	for seen := map[string]bool{}; len(seen) < len(names); {
		select {
		case name := <-reconciled:
			seen[name] = true
		case <-ctx.Done():
			t.Fatalf("the manager reconciled too few config maps before %s", managerTimeout)
		}
	}
	for _, name := range names {
		cm, err := direct.CoreV1().ConfigMaps(ns.Name).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "true", cm.Data[reconciledKey], "config map %s", name)
	}
	require.NoError(t, stopManager())

	assertOneBudget(t, envConfig, &wire, &decisions)
}

// newReconcilingManager returns a manager on rc, with leader election,
// whose controller marks each labelled config map in ns as reconciled and
// sends its name on the returned channel.
func newReconcilingManager(t *testing.T, rc *rest.Config, ns string) (ctrl.Manager, <-chan string) {
	t.Helper()
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Scheme:                        scheme.Scheme,
		LeaderElection:                true,
		LeaderElectionID:              "k8sratelimit-e2e",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Cache:                         ctrlcache.Options{DefaultNamespaces: map[string]ctrlcache.Config{ns: {}}},
	})
	require.NoError(t, err)
	reconciled := make(chan string, 4*reconcileObjects)
	c := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(reconcile.Func(
		func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
				return reconcile.Result{}, ctrlclient.IgnoreNotFound(err)
			}
			if cm.Labels[reconcileLabel] == "" || cm.Data[reconciledKey] == "true" {
				return reconcile.Result{}, nil
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[reconciledKey] = "true"
			if err := c.Update(ctx, &cm); err != nil {
				return reconcile.Result{}, err
			}
			reconciled <- cm.Name
			return reconcile.Result{}, nil
		}))
	require.NoError(t, err)
	return mgr, reconciled
}

// startManager starts mgr and returns the function that stops it: it
// returns what mgr.Start returned, the same on every call.
func startManager(ctx context.Context, mgr ctrl.Manager) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return sync.OnceValue(func() error {
		cancel()
		return <-done
	})
}

// createLabelledConfigMaps creates reconcileObjects config maps the
// controller reconciles, with the unlimited client cs, and returns their
// names.
func createLabelledConfigMaps(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	var names []string
	for i := range reconcileObjects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("object-%d", i),
			Labels: map[string]string{reconcileLabel: "yes"},
		}}
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, cm.Name)
	}
	return names
}

// assertOneBudget checks that the manager's cache, client and leader
// election all sent requests through wire, and that the limiter decided on
// every one of them, on the one budget of the API server: leases exempt,
// the rest counted.
func assertOneBudget(t *testing.T, rc *rest.Config, wire *probe.Wire, decisions *probe.Decisions) {
	t.Helper()
	apiserver, err := cluster.APIServerFor(rc)
	require.NoError(t, err)
	assert.Equal(t, []string{cluster.Key(k8sratelimit.DefaultOwner, apiserver)}, decisions.Keys(), "one budget")

	// A request the manager made as it stopped may have been admitted and
	// not yet reached the wire: read both until they agree, for a while.
	var exchanges []probe.Exchange
	var counts probe.Counts
	var leases, cacheReads, clientWrites int
	deadline := time.Now().Add(2 * time.Second)
	for {
		exchanges, counts = wire.Exchanges(), decisions.Total()
		leases, cacheReads, clientWrites = 0, 0, 0
		for _, e := range exchanges {
			switch {
			case strings.Contains(e.Path, "/coordination.k8s.io/"):
				leases++
			case strings.HasSuffix(e.Path, "/configmaps") && e.Method == http.MethodGet:
				cacheReads++ // the cache's list and watch
			case strings.Contains(e.Path, "/configmaps/") && e.Method == http.MethodPut:
				clientWrites++
			}
		}
		if len(exchanges)-leases == counts.Admitted && leases == counts.Exempt || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("requests sent: %d (leader election %d, cache list/watch %d, client updates %d); limiter: %d admitted, %d exempt, %d deferred",
		len(exchanges), leases, cacheReads, clientWrites, counts.Admitted, counts.Exempt, counts.Deferred)
	assert.Positive(t, leases, "leader election went through the limiter")
	assert.Positive(t, cacheReads, "the cache went through the limiter")
	assert.GreaterOrEqual(t, clientWrites, reconcileObjects, "the client went through the limiter")
	assert.Equal(t, leases, counts.Exempt, "leader election passes as exempt")
	assert.Equal(t, len(exchanges)-leases, counts.Admitted, "everything else counts, once")
	assert.Zero(t, counts.Rejected)
}
