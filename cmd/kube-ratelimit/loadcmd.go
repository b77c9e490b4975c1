package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// loadOptions are the load command's flags.
type loadOptions struct {
	kubeconfig string
	context    string
	runFlags
}

func parseLoadFlags(args []string, stderr io.Writer) (loadOptions, error) {
	// The budget is the environment's unless -limit or -timespan say
	// otherwise.
	o := loadOptions{runFlags: runFlags{workers: 10, duration: 10 * time.Second}}
	fs := newFlagSet("load", "Runs a read-only load (namespace lists and /version) against a real cluster\nthrough the limiter configured from the environment, and ends with a table of\nwhat happened.", stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster to load (required)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	o.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	if err := o.parsed(fs); err != nil {
		return o, err
	}
	if o.kubeconfig == "" {
		return o, fmt.Errorf("-kubeconfig is required")
	}
	return o, nil
}

// namespacesAndVersion returns the load's call: read-only, alternating a
// namespace list and /version.
func namespacesAndVersion() func(ctx context.Context, cs kubernetes.Interface) error {
	var n atomic.Int64
	return func(ctx context.Context, cs kubernetes.Interface) error {
		if n.Add(1)%2 == 0 {
			// As Discovery().ServerVersion() does, but with ctx: the run's
			// end must cut off a call waiting for the budget.
			return cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
		}
		_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 50})
		return err
	}
}

// loadCmd runs the demo's load against a real cluster, read-only, through
// the limiter configured from the environment, and prints the same table.
func loadCmd(args, environ []string, stdout, stderr io.Writer) int {
	o, err := parseLoadFlags(args, stderr)
	if err != nil {
		return parseError("load", err, stderr)
	}
	cfg, err := o.config(environ)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit: %v\n", err)
		return 2
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: o.context},
	).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit load: %v\n", err)
		return 2
	}
	r, usage, code := runLimitedLoad(o, cfg, rc, stdout, stderr)
	if code != 0 {
		return code
	}
	fmt.Fprintln(stdout)
	writeReport(stdout, []demoResult{r}, cfg.Limit, cfg.Timespan)
	if line := usage.summary(cfg); line != "" {
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, line)
	}
	return 0
}

// runLimitedLoad runs the load of o through a limiter configured by cfg
// on rc, and returns what it measured, with the exit code of a failure.
func runLimitedLoad(o loadOptions, cfg k8sratelimit.Config, rc *rest.Config, stdout, stderr io.Writer) (demoResult, *storeUsage, int) {
	st := &stats{}
	rec := &sendRecorder{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	released := &releaseRecorder{Store: memorystore.New(nil), stats: st}
	opts := []k8sratelimit.Option{k8sratelimit.WithObserver(st)}
	var usage storeUsage
	if cfg.Store == k8sratelimit.StoreMemory {
		opts = append(opts, k8sratelimit.WithStore(released))
	} else {
		s, err := newRedisStore(cfg, &usage)
		if err != nil {
			fmt.Fprintf(stderr, "kube-ratelimit load: %v\n", err)
			return demoResult{}, nil, 2
		}
		defer s.Close() // after the limiter's Close, deferred below
		opts = append(opts, k8sratelimit.WithStore(s))
	}
	l, err := k8sratelimit.New(cfg, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit load: %v\n", err)
		return demoResult{}, nil, 1
	}
	defer l.Close()
	if err := l.Configure(rc); err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit load: %v\n", err)
		return demoResult{}, nil, 1
	}
	st.watchSeats(l, rc)

	fmt.Fprintf(stdout, "Load: %d workers, each with its own clientset, listing namespaces and reading /version of %s for %v.\n",
		o.workers, rc.Host, o.duration)
	fmt.Fprintf(stdout, "Budget: %d requests per %v (%s strategy, max wait %s).\n\n", cfg.Limit, cfg.Timespan, cfg.Strategy, maxWaitText(cfg))
	p := newProgress(stdout, "k8sratelimit", o.duration)
	err = runLoad(context.Background(), rc, loadSpec{workers: o.workers, duration: o.duration, call: namespacesAndVersion()}, st,
		func(start, now time.Time) {
			p.update(now, now.Sub(start), snapshotOf(st, start, now, st.throttled.Load()))
		}, p.interval())
	p.done()
	if err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit load: %v\n", err)
		return demoResult{}, nil, 1
	}
	r := demoResult{
		name:       "k8sratelimit",
		limited:    true,
		stats:      st,
		serverSeen: len(rec.at),
		throttled:  int(st.throttled.Load()),
		maxSent:    released.mostInWindow(cfg.Timespan - windowSlack(cfg.Timespan)),
		maxWindow:  -1,
	}
	if cfg.Store != k8sratelimit.StoreMemory {
		// The Redis store's decisions are not recorded: count the requests
		// as they enter the transport, the truth of what was sent.
		r.maxSent = rec.mostInWindow(cfg.Timespan - windowSlack(cfg.Timespan))
	}
	return r, &usage, 0
}
