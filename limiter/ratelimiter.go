package limiter

import (
	"context"
	"sync"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/k8sratelimit/k8sratelimit/internal/ctxopt"
)

// RateLimiter adapts a Budget to client-go's flowcontrol.RateLimiter, for
// callers that can only take one (rest.Config.RateLimiter). It sees no
// requests and no responses, so it cannot exempt leases or follow a
// server's 429s: do not use it for leader election.
type RateLimiter struct {
	budget   *Budget
	stop     chan struct{}
	stopOnce sync.Once
}

var _ flowcontrol.RateLimiter = (*RateLimiter)(nil)

// RateLimiter returns a new flowcontrol.RateLimiter on the budget b.
func (b *Budget) RateLimiter() *RateLimiter {
	return &RateLimiter{budget: b, stop: make(chan struct{})}
}

// TryAccept takes a slot only if one is free now.
func (r *RateLimiter) TryAccept() bool {
	if r.stopped() {
		return false
	}
	return r.budget.wait(neverWait, r.stop) == nil
}

// neverWait is the context of TryAccept, made once: it admits only at once.
var neverWait = ctxopt.WithMaxWait(context.Background(), 0)

// Accept takes a slot, waiting as long as it takes (the maximum wait does
// not apply: Accept cannot fail). It returns at once after Stop or when
// the Engine is closed.
func (r *RateLimiter) Accept() {
	if r.stopped() {
		return
	}
	_ = r.budget.wait(ctxopt.WithUnlimitedWait(context.Background()), r.stop)
}

// Wait takes a slot following the rules of Budget.Wait. After Stop it
// fails with an error that matches errors.ErrClosed.
func (r *RateLimiter) Wait(ctx context.Context) error {
	if r.stopped() {
		return errStopped
	}
	return r.budget.wait(ctx, r.stop)
}

func (r *RateLimiter) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// QPS returns the budget's limit per second.
func (r *RateLimiter) QPS() float32 {
	p := r.budget.l.policy
	return float32(float64(p.Limit) / p.Timespan.Seconds())
}

// Stop wakes the requests waiting in this RateLimiter (only these), which
// release their slots; later calls fail. Stop is idempotent.
func (r *RateLimiter) Stop() {
	r.stopOnce.Do(func() { close(r.stop) })
}

// Budget returns the budget the RateLimiter takes slots from.
func (r *RateLimiter) Budget() *Budget { return r.budget }
