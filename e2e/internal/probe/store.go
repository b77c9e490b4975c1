package probe

import (
	"context"
	"time"

	"github.com/k8sratelimit/k8sratelimit/internal/decided"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// DecisionStore is a store.Store that records the span of every call in
// which it told a request to go: a Reserve answered with no wait, or a
// Confirm answered with no time left. The decision lies somewhere between
// the call's start and its return; it is there, not where the request
// leaves, that the window must hold, so a window is checked on these spans
// (package decided) and comparing them with a Wire's instants tells a late
// decision from a late send. It is safe for concurrent use.
type DecisionStore struct {
	store.Store

	decisions decided.Recorder
}

// NewDecisionStore returns a DecisionStore over s.
func NewDecisionStore(s store.Store) *DecisionStore { return &DecisionStore{Store: s} }

// Reserve implements store.Store.
func (d *DecisionStore) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	from := time.Now()
	res, err := d.Store.Reserve(ctx, key, p, r)
	if err == nil && res.OK && res.Wait == 0 {
		d.decisions.Add(from, time.Now())
	}
	return res, err
}

// Confirm implements store.Store.
func (d *DecisionStore) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	from := time.Now()
	left, err := d.Store.Confirm(ctx, key, id)
	if err == nil && left == 0 {
		d.decisions.Add(from, time.Now())
	}
	return left, err
}

// Spans returns the spans of the calls in which the store told a request
// to go, sorted by their start.
func (d *DecisionStore) Spans() []decided.Span { return d.decisions.Spans() }
