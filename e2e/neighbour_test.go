package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/k8sratelimit/k8sratelimit"
)

// The neighbour runs: neighbourWorkers workers of another user of the same
// priority level (3 seats, rejecting) send without ever waiting for a
// Retry-After, while ours run for neighbourRun.
const (
	neighbourWorkers = 40
	neighbourRun     = 30 * time.Second
)

// TestNeighbourThatDoesNotBackOff measures what 40 workers are served
// beside a neighbour that ignores Retry-After, through the library with
// its defaults and with plain client-go retrying each 429 after its
// Retry-After: the level's Retry-After is the neighbour's doing, and every
// client that honours it is served little. The library sends fewer 429s.
func TestNeighbourThatDoesNotBackOff(t *testing.T) {
	stop := startNeighbour(t)
	defer stop()
	escalateRetryAfter(t, userNeighbour, 8)

	cfg := k8sratelimit.DefaultConfig()
	library := newLoadClient(t, fmt.Sprintf("%d workers, k8sratelimit, default configuration", seatsWorkers), userBeside, seatsWorkers, &cfg)
	plain := newLoadClient(t, fmt.Sprintf("%d workers, client-go retries, no limiter", seatsWorkers), userBeside, seatsWorkers, nil)
	lib := library.load(neighbourRun)
	cg := plain.load(neighbourRun)
	t.Logf("beside %d workers of another user that ignore Retry-After, on a level of 3 seats that rejects, %s each:\n%s",
		neighbourWorkers, neighbourRun, servedTable(lib, cg))
	assert.LessOrEqual(t, lib.throttled, cg.throttled, "the library sends no more 429s than plain client-go")
}

// startNeighbour starts neighbourWorkers workers of userNeighbour that
// read in a loop and never wait: client-go does not retry, and they send
// again at once. The function it returns stops them.
func startNeighbour(t *testing.T) (stop func()) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(userConfig(userNeighbour))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range neighbourWorkers {
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = getOnce(cs)(ctx)
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
