package e2e_test

// Two OS processes - this test binary, re-executed as children - share
// one budget through a real redis-server while they send to the real API
// server.

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/childproc"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// The child's settings, besides the KUBERNETES_RATELIMIT_* configuration.
const (
	childEnv      = "K8SRATELIMIT_E2E_CHILD" // its name; set: run as a child
	childHost     = "K8SRATELIMIT_E2E_HOST"
	childToken    = "K8SRATELIMIT_E2E_TOKEN"
	childCA       = "K8SRATELIMIT_E2E_CA" // base64
	childRequests = "K8SRATELIMIT_E2E_REQUESTS"
	childWorkers  = "K8SRATELIMIT_E2E_WORKERS"
	childFor      = "K8SRATELIMIT_E2E_FOR"  // set: list namespaces for this long instead
	childBare     = "K8SRATELIMIT_E2E_BARE" // set: with childFor, send through no limiter (a baseline)
)

// runChild reads probePath the number of times it is told through a
// limiter configured from the environment, and reports when each request
// left (below the limiter) and how many calls succeeded and failed. It
// returns 2 when it cannot start.
func runChild() int {
	cfg, err := k8sratelimit.LoadConfig(os.Environ())
	if err != nil {
		return childproc.Fail(err)
	}
	lim, err := k8sratelimit.New(cfg)
	if err != nil {
		return childproc.Fail(err)
	}
	defer lim.Close()
	ca, err := base64.StdEncoding.DecodeString(os.Getenv(childCA))
	if err != nil {
		return childproc.Fail(err)
	}
	rc := &rest.Config{Host: os.Getenv(childHost), BearerToken: os.Getenv(childToken),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}, UserAgent: os.Getenv(childEnv)}
	if d := os.Getenv(childFor); d != "" {
		workers, _ := strconv.Atoi(os.Getenv(childWorkers))
		if os.Getenv(childBare) != "" {
			lim = nil
		}
		return runChildFor(lim, rc, workers, d)
	}
	var sends childproc.Sends
	rc.Wrap(sends.Wrap)
	if err := lim.Configure(rc); err != nil {
		return childproc.Fail(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return childproc.Fail(err)
	}
	workers, _ := strconv.Atoi(os.Getenv(childWorkers))
	n, _ := strconv.Atoi(os.Getenv(childRequests))
	errs := runLoad(context.Background(), workers, n/workers, getRetrying(cs))
	for _, err := range errs {
		fmt.Fprintln(os.Stderr, "child:", err)
	}
	var report childproc.Report
	report.Sends(sends.Times())
	report.Result(n-len(errs), len(errs))
	report.Print()
	return 0
}

// childConn is the environment through which a child reaches the API
// server as rc does.
func childConn(rc *rest.Config) []string {
	return []string{
		childHost + "=" + rc.Host,
		childToken + "=" + rc.BearerToken,
		childCA + "=" + base64.StdEncoding.EncodeToString(rc.CAData),
	}
}

// waitShared waits for the child and returns when its requests left, and
// how many calls succeeded.
func waitShared(t *testing.T, c *childproc.Process) (sends []time.Time, sent int) {
	t.Helper()
	r := childproc.Parse(c.Wait(t))
	assert.Zero(t, r.Failed, "child %s: %s", c.Name, c.Output())
	return r.Sends, r.Sent
}

// TestRedisSharedBudgetAcrossProcesses has two processes send to the real
// API server through one budget kept in Redis: together they never send
// more than the budget in any rolling second.
func TestRedisSharedBudgetAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const limit, requests, workers = 10, 30, 10
	user := suite.cp.UserConfig(userPlain)
	env := slices.Concat([]string{
		"KUBERNETES_RATELIMIT=" + strconv.Itoa(limit),
		"KUBERNETES_RATELIMIT_TIMESPAN=second",
		childRequests + "=" + strconv.Itoa(requests),
		childWorkers + "=" + strconv.Itoa(workers),
	}, childproc.RedisBudget(srv.URL(), "e2e"), childConn(user))
	a := childproc.Start(t, childEnv, "a", env...)
	b := childproc.Start(t, childEnv, "b", env...)
	sendsA, sentA := waitShared(t, a)
	sendsB, sentB := waitShared(t, b)
	require.Equal(t, 2*requests, sentA+sentB, "every call is served")

	all := slices.Concat(sendsA, sendsB)
	slices.SortFunc(all, func(x, y time.Time) int { return x.Compare(y) })
	const tolerance = 50 * time.Millisecond // a request leaves a moment after the decision
	most := apisim.MostInWindow(all, time.Second-tolerance)
	assert.LessOrEqual(t, most, limit, "no rolling second sees more than the budget leave, across both processes")
	elapsed := all[len(all)-1].Sub(all[0])
	t.Logf("2 processes sent %d requests (a %d, b %d) in %v; most in any %v: %d (budget %d per second)",
		len(all), len(sendsA), len(sendsB), elapsed.Round(time.Millisecond), time.Second-tolerance, most, limit)
	assert.GreaterOrEqual(t, elapsed, time.Duration(len(all)/limit-1)*time.Second-tolerance,
		"the two processes did not each take a budget of their own")
}
