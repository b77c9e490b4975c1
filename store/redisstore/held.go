package redisstore

import (
	"context"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// heldRequest is a request whose slot lies more than one timespan ahead:
// it waits in-process, in arrival order, and is recorded in Redis once its
// slot comes within a timespan.
type heldRequest struct {
	id     uint64
	jitter time.Duration
	slot   int64 // estimated, on the server's clock, µs
	mark   int64 // as reply.mark
}

// holdLocked queues request id, whose slot is estimated wait away, in
// process. b.mu must be held.
func (s *Store) holdLocked(b *redisBudget, id uint64, r store.Request, rep reply) {
	h := &heldRequest{id: id, jitter: r.Jitter, slot: rep.now + micros(rep.wait), mark: rep.mark}
	b.held = append(b.held, h)
	b.heldByID[id] = h
	if len(b.held) == 1 {
		s.schedulePromotionLocked(b)
	}
}

// due reports whether a held request's slot is within one timespan.
func (s *Store) due(b *redisBudget, h *heldRequest) bool {
	return h.slot-s.serverMicros() <= micros(b.policy.Timespan)
}

// promoteDueLocked records in Redis, in order, the held requests whose
// slots have come within one timespan. b.mu must be held.
func (s *Store) promoteDueLocked(ctx context.Context, b *redisBudget) error {
	for len(b.held) > 0 && s.due(b, b.held[0]) {
		if err := s.promoteFirstLocked(ctx, b); err != nil {
			return err
		}
	}
	s.schedulePromotionLocked(b)
	return nil
}

// promoteFirstLocked records the first held request in Redis at the
// earliest slot it now has, whatever the wait. b.mu must be held.
func (s *Store) promoteFirstLocked(ctx context.Context, b *redisBudget) error {
	h := b.held[0]
	rep, err := s.reserve(ctx, b, b.policy, store.Request{MaxWait: store.NoMaxWait, Jitter: h.jitter}, h.id, nil, store.NoMaxWait)
	if err != nil {
		return err
	}
	b.held[0] = nil
	b.held = b.held[1:]
	delete(b.heldByID, h.id)
	if rep.wait > 0 || b.policy.Strategy != store.StrategyLinear {
		// A window records the send instant: its Confirm moves it to when
		// the waiter really sends, should that be later.
		b.outstanding[h.id] = struct{}{}
	} else {
		b.ready[h.id] = struct{}{} // sent at its next Confirm
	}
	slot := rep.now + micros(rep.wait)
	if slot < h.slot {
		// Its turn came sooner than estimated (a slot was freed): wake it.
		s.wakeLocal(b.key)
	}
	h.slot = slot
	return nil
}

// confirmHeldLocked answers the Confirm of a held request: the time left
// to its estimated slot while it is not due, else the time left to the
// slot it is recorded at. b.mu must be held.
func (s *Store) confirmHeldLocked(ctx context.Context, b *redisBudget, h *heldRequest) (time.Duration, error) {
	if !s.due(b, h) {
		return s.until(h.slot), nil
	}
	// The requests held before it are due too: record them first.
	for b.heldByID[h.id] != nil {
		if err := s.promoteFirstLocked(ctx, b); err != nil {
			return 0, err
		}
	}
	s.schedulePromotionLocked(b)
	delete(b.ready, h.id)
	return s.until(h.slot), nil
}

// unholdLocked drops a held request that will not be used. It reports
// whether id was held. b.mu must be held.
func (s *Store) unholdLocked(b *redisBudget, id uint64) bool {
	h, ok := b.heldByID[id]
	if !ok {
		return false
	}
	delete(b.heldByID, id)
	for i, x := range b.held {
		if x == h {
			b.held = append(b.held[:i], b.held[i+1:]...)
			break
		}
	}
	return true
}

// until returns the time from now to the server time at (µs), at least 0.
func (s *Store) until(at int64) time.Duration {
	return time.Duration(max(at-s.serverMicros(), 0)) * time.Microsecond
}

// shiftHeldLocked moves the estimates of held requests after a cooldown
// that ends left µs from now and moved the recorded reservations by moved
// µs: by the same amount, or so that the first starts at its end when
// nothing recorded was ahead. b.mu must be held.
func (s *Store) shiftHeldLocked(b *redisBudget, left, moved int64) {
	if len(b.held) == 0 {
		return
	}
	delta := moved
	if end := s.serverMicros() + left; delta == 0 && b.held[0].slot < end {
		delta = end - b.held[0].slot
	}
	for _, h := range b.held {
		h.slot += delta
		h.mark += delta
	}
	s.schedulePromotionLocked(b)
}

// schedulePromotionLocked arms the timer that promotes the first held
// request when it comes due, so that it is recorded in Redis one timespan
// ahead even if nothing else happens on the budget. b.mu must be held.
func (s *Store) schedulePromotionLocked(b *redisBudget) {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if len(b.held) == 0 {
		return
	}
	in := max(s.until(b.held[0].slot)-b.policy.Timespan, 0)
	b.timer = time.AfterFunc(in, func() {
		select {
		case <-s.done:
			return
		default:
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if s.down.Load() {
			return
		}
		if err := s.promoteDueLocked(s.background(), b); err != nil {
			s.trip(err)
		}
	})
}
