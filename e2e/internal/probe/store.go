package probe

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// DecisionStore is a store.Store that records when it told a request to
// go: a Reserve answered with no wait, or a Confirm answered with no time
// left. It sits where the limiter makes its decisions, so comparing its
// instants with a Wire's tells a late decision from a late send. It is
// safe for concurrent use.
type DecisionStore struct {
	store.Store

	mu    sync.Mutex
	goAts []time.Time
}

// NewDecisionStore returns a DecisionStore over s.
func NewDecisionStore(s store.Store) *DecisionStore { return &DecisionStore{Store: s} }

// Reserve implements store.Store.
func (d *DecisionStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	res, err := d.Store.Reserve(ctx, key, p, r)
	if err == nil && res.OK && res.Wait == 0 {
		d.record(time.Now())
	}
	return res, err
}

// Confirm implements store.Store.
func (d *DecisionStore) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	left, err := d.Store.Confirm(ctx, key, id)
	if err == nil && left == 0 {
		d.record(time.Now())
	}
	return left, err
}

// GoTimes returns the instants the store told a request to go, sorted.
func (d *DecisionStore) GoTimes() []time.Time {
	d.mu.Lock()
	ts := slices.Clone(d.goAts)
	d.mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

func (d *DecisionStore) record(at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.goAts = append(d.goAts, at)
}
