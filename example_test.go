package k8sratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
)

func ExampleLoadConfig() {
	cfg, err := k8sratelimit.LoadConfig([]string{
		"KUBERNETES_RATELIMIT=100",
		"KUBERNETES_RATELIMIT_TIMESPAN=second",
		"KUBERNETES_RATELIMIT_MAX_WAIT=2s",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Limit, cfg.Timespan, *cfg.MaxWait)
	// Output: 100 1s 2s
}

func ExampleLoadConfig_invalid() {
	_, err := k8sratelimit.LoadConfig([]string{"KUBERNETES_RATELIMIT_MAXWAIT=2s"})
	fmt.Println(err)

	_, err = k8sratelimit.LoadConfig([]string{"KUBERNETES_RATELIMIT_TIMESPAN=fortnight"})
	var ice *rlerrors.InvalidConfigurationError
	if errors.As(err, &ice) {
		fmt.Printf("%s: %q is not accepted; accepted: %s\n", ice.Key, ice.Value, ice.Reason)
	}
	// Output:
	// invalid configuration: KUBERNETES_RATELIMIT_MAXWAIT: not a known variable; did you mean KUBERNETES_RATELIMIT_MAX_WAIT?
	// KUBERNETES_RATELIMIT_TIMESPAN: "fortnight" is not accepted; accepted: one of second, minute, hour, day (any case)
}

func ExampleLoadConfig_killSwitch() {
	// With ENABLED=false nothing else is read, so a bad value elsewhere
	// cannot stop the kill switch from working in an incident.
	cfg, err := k8sratelimit.LoadConfig([]string{
		"KUBERNETES_RATELIMIT_ENABLED=false",
		"KUBERNETES_RATELIMIT=not-a-number",
	})
	fmt.Println(cfg.Enabled, err)
	// Output: false <nil>
}

func ExampleConfig_Validate() {
	cfg := k8sratelimit.DefaultConfig()
	cfg.Strategy = k8sratelimit.StrategyLinear
	cfg.Limit = 50
	cfg.Timespan = 10 * time.Second
	cfg.Burst = 100
	fmt.Println(cfg.Validate())
	// Output: invalid configuration: KUBERNETES_RATELIMIT_BURST="100": an integer from 1 to the limit (50)
}

func ExampleConfigure() {
	srv := apisim.New() // stands in for the API server
	defer srv.Close()

	rc := &rest.Config{Host: srv.URL}
	// One line: every client built from rc shares the budget of its API
	// server, configured from KUBERNETES_RATELIMIT*.
	if err := k8sratelimit.Configure(rc); err != nil {
		fmt.Println(err)
		return
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	v, err := cs.Discovery().ServerVersion()
	fmt.Println(v.GitVersion, err, rc.QPS)
	// Output: v1.37.2-apisim <nil> -1
}

func ExampleLimiter_ConfigureCluster() {
	srv := apisim.New()
	defer srv.Close()

	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit = 1
	never := time.Duration(0)
	cfg.MaxWait = &never
	l, err := k8sratelimit.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	rc := &rest.Config{Host: srv.URL}
	if err := l.ConfigureCluster("staging", rc); err != nil {
		fmt.Println(err)
		return
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	ctx := context.Background()
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	fmt.Println(err)
	_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	var rle *rlerrors.RateLimitExceededError
	if errors.As(err, &rle) {
		fmt.Println(rle.Cluster, rle.RetryAfterSeconds(), apierrors.IsTooManyRequests(err))
	}
	// Output:
	// <nil>
	// staging 60 true
}
