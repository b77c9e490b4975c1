package e2e_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

// probePath is what the load requests: a cheap read every test user may
// make.
const probePath = "/api/v1/namespaces/default"

// runLoad runs workers goroutines that each call call calls times, and
// returns the errors the calls returned.
func runLoad(ctx context.Context, workers, calls int, call func(context.Context) error) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range calls {
				if err := call(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// getOnce reads probePath with cs once: client-go does not retry a 429.
func getOnce(cs kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		return cs.CoreV1().RESTClient().Get().AbsPath(probePath).MaxRetries(0).Do(ctx).Error()
	}
}

// getRetrying reads probePath with cs, retrying 429s as client-go does by
// default (up to 10 times, after the answer's Retry-After).
func getRetrying(cs kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		return cs.CoreV1().RESTClient().Get().AbsPath(probePath).Do(ctx).Error()
	}
}

// requeueAfter waits, as a controller's work queue would, for the
// RetryAfter of err when the limiter refused the request, or until ctx
// ends. A worker that calls again at once spins, and takes the API
// server's cores.
func requeueAfter(ctx context.Context, err error) {
	var refused *rlerrors.RateLimitExceededError
	if !errors.As(err, &refused) {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(refused.RetryAfter()):
	}
}
