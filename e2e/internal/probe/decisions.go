package probe

import (
	"slices"
	"sync"
	"time"

	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// Decisions is a limiter.Observer that counts the limiter's decisions by
// budget key. It is safe for concurrent use.
type Decisions struct {
	mu     sync.Mutex
	counts map[string]*Counts
	admits []time.Time // when each counted request was admitted, in order
}

// Counts are the decisions on one budget.
type Counts struct {
	Admitted  int             // counted requests sent, at once or after waiting
	Deferred  int             // of them, those that waited
	MaxWait   time.Duration   // the longest wait of a sent request
	Rejected  int             // RateLimitExceededErrors
	Exempt    int             // requests that passed without counting
	Throttled int             // server throttling answers seen
	Cooldowns []time.Duration // the cooldowns those answers set
}

var _ limiter.Observer = (*Decisions)(nil)

// Keys returns the budget keys decisions were made on.
func (d *Decisions) Keys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]string, 0, len(d.counts))
	for k := range d.counts {
		keys = append(keys, k)
	}
	return keys
}

// Total returns the decisions on every budget, added up.
func (d *Decisions) Total() Counts {
	d.mu.Lock()
	defer d.mu.Unlock()
	var t Counts
	for _, c := range d.counts {
		t.Admitted += c.Admitted
		t.Deferred += c.Deferred
		t.MaxWait = max(t.MaxWait, c.MaxWait)
		t.Rejected += c.Rejected
		t.Exempt += c.Exempt
		t.Throttled += c.Throttled
		t.Cooldowns = append(t.Cooldowns, c.Cooldowns...)
	}
	return t
}

// update applies f to the counts of key under the lock.
func (d *Decisions) update(key string, f func(*Counts)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = make(map[string]*Counts)
	}
	c, ok := d.counts[key]
	if !ok {
		c = &Counts{}
		d.counts[key] = c
	}
	f(c)
}

// AdmitTimes returns the instants counted requests were admitted at, on
// every budget, sorted.
func (d *Decisions) AdmitTimes() []time.Time {
	d.mu.Lock()
	ts := slices.Clone(d.admits)
	d.mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// Admitted implements limiter.Observer.
func (d *Decisions) Admitted(_, key string, _ limiter.Class, wait time.Duration, _ limiter.WaitReason) {
	now := time.Now()
	d.update(key, func(c *Counts) {
		d.admits = append(d.admits, now)
		c.Admitted++
		if wait > 0 {
			c.Deferred++
		}
		c.MaxWait = max(c.MaxWait, wait)
	})
}

// Rejected implements limiter.Observer.
func (d *Decisions) Rejected(_, key string, _ limiter.Class, _ time.Duration) {
	d.update(key, func(c *Counts) { c.Rejected++ })
}

// Exempt implements limiter.Observer.
func (d *Decisions) Exempt(_, key string) {
	d.update(key, func(c *Counts) { c.Exempt++ })
}

// Throttled implements limiter.Observer.
func (d *Decisions) Throttled(_, key string, _ int, cooldown time.Duration) {
	d.update(key, func(c *Counts) {
		c.Throttled++
		c.Cooldowns = append(c.Cooldowns, cooldown)
	})
}
