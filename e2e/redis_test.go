package e2e_test

// Two OS processes - this test binary, re-executed as children - share
// one budget through a real redis-server while they send to the real API
// server.

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/harness"
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
	childFor      = "K8SRATELIMIT_E2E_FOR" // set: list namespaces for this long instead
)

// runChild reads probePath the number of times it is told through a
// limiter configured from the environment, and prints "at <unix ns>" for
// each request as it leaves (below the limiter), then "sent <n> failed
// <n>". It returns 2 when it cannot start.
func runChild() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 2 }
	cfg, err := k8sratelimit.LoadConfig(os.Environ())
	if err != nil {
		return fail(err)
	}
	lim, err := k8sratelimit.New(cfg)
	if err != nil {
		return fail(err)
	}
	defer lim.Close()
	ca, err := base64.StdEncoding.DecodeString(os.Getenv(childCA))
	if err != nil {
		return fail(err)
	}
	rc := &rest.Config{Host: os.Getenv(childHost), BearerToken: os.Getenv(childToken),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca}, UserAgent: os.Getenv(childEnv)}
	if d := os.Getenv(childFor); d != "" {
		workers, _ := strconv.Atoi(os.Getenv(childWorkers))
		return runChildFor(lim, rc, workers, d)
	}
	var mu sync.Mutex
	var sends []int64
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return harness.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sends = append(sends, time.Now().UnixNano())
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	if err := lim.Configure(rc); err != nil {
		return fail(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fail(err)
	}
	workers, _ := strconv.Atoi(os.Getenv(childWorkers))
	n, _ := strconv.Atoi(os.Getenv(childRequests))
	errs := runLoad(context.Background(), workers, n/workers, getRetrying(cs))
	for _, err := range errs {
		fmt.Fprintln(os.Stderr, "child:", err)
	}
	mu.Lock()
	for _, at := range sends {
		fmt.Printf("at %d\n", at)
	}
	mu.Unlock()
	fmt.Printf("sent %d failed %d\n", n-len(errs), len(errs))
	return 0
}

// sharedChild is a child process and what it printed.
type sharedChild struct {
	name string
	cmd  *exec.Cmd
	out  strings.Builder
}

func startSharedChild(t *testing.T, name string, env []string) *sharedChild {
	t.Helper()
	c := &sharedChild{name: name}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(append(os.Environ(), env...), childEnv+"="+name)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	require.NoError(t, c.cmd.Start())
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	return c
}

// wait waits for the child and returns when its requests left, and how
// many calls succeeded.
func (c *sharedChild) wait(t *testing.T) (sends []time.Time, sent int) {
	t.Helper()
	require.NoError(t, c.cmd.Wait(), "child %s: %s", c.name, c.out.String())
	sc := bufio.NewScanner(strings.NewReader(c.out.String()))
	for sc.Scan() {
		var at int64
		var failed int
		if _, err := fmt.Sscanf(sc.Text(), "at %d", &at); err == nil {
			sends = append(sends, time.Unix(0, at))
		} else if _, err := fmt.Sscanf(sc.Text(), "sent %d failed %d", &sent, &failed); err == nil {
			assert.Zero(t, failed, "child %s: %s", c.name, c.out.String())
		}
	}
	return sends, sent
}

// TestRedisSharedBudgetAcrossProcesses has two processes send to the real
// API server through one budget kept in Redis: together they never send
// more than the budget in any rolling second.
func TestRedisSharedBudgetAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	const limit, requests, workers = 10, 30, 10
	user := suite.cp.UserConfig(userPlain)
	env := []string{
		"KUBERNETES_RATELIMIT=" + strconv.Itoa(limit),
		"KUBERNETES_RATELIMIT_TIMESPAN=second",
		"KUBERNETES_RATELIMIT_STORE=redis",
		"KUBERNETES_RATELIMIT_OWNER=e2e",
		"KUBERNETES_RATELIMIT_REDIS_URL=" + srv.URL(),
		childHost + "=" + user.Host,
		childToken + "=" + user.BearerToken,
		childCA + "=" + base64.StdEncoding.EncodeToString(user.CAData),
		childRequests + "=" + strconv.Itoa(requests),
		childWorkers + "=" + strconv.Itoa(workers),
	}
	a := startSharedChild(t, "a", env)
	b := startSharedChild(t, "b", env)
	sendsA, sentA := a.wait(t)
	sendsB, sentB := b.wait(t)
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
