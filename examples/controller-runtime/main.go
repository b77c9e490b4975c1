// Command controller-runtime is a controller-runtime manager whose every
// request to the API server — the client's, the cache's informers', the
// RESTMapper's discovery, leader election's and the event recorder's —
// goes through one k8sratelimit budget.
//
// It annotates every ConfigMap of one namespace with
// example.k8sratelimit.io/reconciled, under leader election, and serves
// the limiter's metrics next to controller-runtime's own.
//
// Run it against a cluster with
//
//	go run . --kubeconfig ~/.kube/config --namespace default
//
// The budget is configured from the KUBERNETES_RATELIMIT* environment
// (400 requests per minute per API server by default).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// reconciledAnnotation is the annotation the reconciler puts on every
// ConfigMap it has seen.
const reconciledAnnotation = "example.k8sratelimit.io/reconciled"

// options are the program's settings.
type options struct {
	// namespace is the namespace whose ConfigMaps are reconciled; the
	// leader election lease lives there too.
	namespace string
	// leaderElectionID names the lease that leader election holds.
	leaderElectionID string
	// metricsAddr is where controller-runtime serves its metrics, the
	// limiter's included; "0" serves none.
	metricsAddr string
	// skipNameValidation lets more than one manager in a process register
	// the same controller name, as several runs of one test do.
	skipNameValidation bool
}

func main() {
	o := options{leaderElectionID: "k8sratelimit-example-controller-runtime"}
	// --kubeconfig is registered by controller-runtime; without it,
	// ctrl.GetConfigOrDie reads $KUBECONFIG, the in-cluster config, or
	// ~/.kube/config.
	flag.StringVar(&o.namespace, "namespace", "default", "the namespace whose ConfigMaps are annotated; the leader election lease lives there too")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", `the address the metrics are served on; "0" serves none`)
	flag.Parse()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))

	if err := start(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// start builds the limiter from the environment, with its metrics on
// controller-runtime's registry, runs the manager until ctx ends and
// closes the limiter.
func start(ctx context.Context, o options) error {
	cfg := ctrl.GetConfigOrDie()
	lim, err := newLimiter(os.Environ(), metrics.Registry)
	if err != nil {
		return err
	}
	defer lim.Close()
	ctrl.Log.Info("client-side rate limit", "config", lim.Config().String())
	return run(ctx, cfg, lim, o)
}

// newLimiter returns a limiter configured from environ (KUBERNETES_RATELIMIT*
// entries; see k8sratelimit.LoadConfig) whose Prometheus metrics are
// registered on reg. Given controller-runtime's metrics.Registry, they are
// served by the manager's metrics server with no server of their own.
func newLimiter(environ []string, reg prometheus.Registerer, opts ...k8sratelimit.Option) (*k8sratelimit.Limiter, error) {
	cfg, err := k8sratelimit.LoadConfig(environ)
	if err != nil {
		return nil, err
	}
	return k8sratelimit.New(cfg, append(opts, k8sratelimit.WithMetrics(reg))...)
}

// run configures cfg with lim, then runs a manager built from it, with
// leader election and the ConfigMap reconciler, until ctx ends.
func run(ctx context.Context, cfg *rest.Config, lim *k8sratelimit.Limiter, o options) error {
	// Configure before ctrl.NewManager: the manager copies cfg for
	// everything it builds — its client, the cache and its informers, the
	// discovery behind the RESTMapper, leader election, the event
	// recorder — and every copy keeps the limiter's transport, so they all
	// share the one budget of this API server. A rest.Config configured
	// after NewManager would limit none of them.
	//
	// Leader election goes through the same transport, which recognises
	// coordination.k8s.io leases and lets them pass without waiting: a
	// renewal queued behind list calls would cost the leader its lease.
	if err := lim.Configure(cfg); err != nil {
		return fmt.Errorf("configuring the rate limit: %w", err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.namespace: {}},
		},
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		LeaderElection:                true,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: new(o.skipNameValidation)},
	})
	if err != nil {
		return fmt.Errorf("building the manager: %w", err)
	}

	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Complete(&configMapReconciler{Client: mgr.GetClient()})
	if err != nil {
		return fmt.Errorf("building the controller: %w", err)
	}
	return mgr.Start(ctx)
}

// configMapReconciler annotates every ConfigMap it sees with
// reconciledAnnotation.
type configMapReconciler struct {
	client.Client
}

// Reconcile annotates the ConfigMap named by req, unless it is gone or
// already annotated.
func (r *configMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil { // read from the cache
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, ok := cm.Annotations[reconciledAnnotation]; ok {
		return ctrl.Result{}, nil
	}

	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[reconciledAnnotation] = "true"
	log.FromContext(ctx).Info("annotating the ConfigMap", "annotation", reconciledAnnotation)
	err := r.Patch(ctx, &cm, patch) // sent to the API server, through the budget
	return requeueOnRateLimit(ctx, err)
}

// requeueOnRateLimit turns the limiter's refusal (a request that would
// wait longer than KUBERNETES_RATELIMIT_MAX_WAIT) into a requeue after the
// wait it names, instead of an error and exponential backoff. Without a
// maximum wait, requests wait for their slot and are never refused.
func requeueOnRateLimit(ctx context.Context, err error) (ctrl.Result, error) {
	var rle *rlerrors.RateLimitExceededError
	if errors.As(err, &rle) {
		log.FromContext(ctx).Info("over the client-side budget, trying again later", "retryAfter", rle.RetryAfter())
		return ctrl.Result{RequeueAfter: rle.RetryAfter()}, nil
	}
	return ctrl.Result{}, err
}
