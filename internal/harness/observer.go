package harness

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// Observer is a limiter.Observer that counts the limiter's decisions and
// records the throttling answers it reports. The zero Observer is ready to
// use; it is safe for concurrent use.
type Observer struct {
	limiter.NopObserver
	Admits, Rejects, Exempts atomic.Int32 // calls of Admitted, Rejected and Exempt

	mu        sync.Mutex
	throttled []Throttle
}

// Throttle is a throttling answer the limiter reported: its status code and
// the cooldown it set.
type Throttle struct {
	Code     int
	Cooldown time.Duration
}

// Admitted implements limiter.Observer.
func (o *Observer) Admitted(string, string, limiter.Class, time.Duration, limiter.WaitReason) {
	o.Admits.Add(1)
}

// Rejected implements limiter.Observer.
func (o *Observer) Rejected(string, string, limiter.Class, time.Duration) { o.Rejects.Add(1) }

// Exempt implements limiter.Observer.
func (o *Observer) Exempt(string, string) { o.Exempts.Add(1) }

// Throttled implements limiter.Observer.
func (o *Observer) Throttled(_, _ string, code int, cooldown time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.throttled = append(o.throttled, Throttle{Code: code, Cooldown: cooldown})
}

// Throttles returns the throttling answers reported so far, in order.
func (o *Observer) Throttles() []Throttle {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.throttled)
}
