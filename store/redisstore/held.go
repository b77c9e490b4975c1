package redisstore

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// heldRequest is a request whose slot lies more than one timespan ahead:
// it waits in-process, in arrival order, and is recorded in Redis once its
// slot comes within a timespan. A released one stays, freed, as the memory
// store keeps a released slot: it still counts, so that the estimates
// after it stay valid, and a newcomer of this process may claim it; it is
// recorded in Redis as a released slot.
type heldRequest struct {
	id     uint64
	order  uint64 // its place among this process's reservations (see Store.member)
	jitter time.Duration
	slot   int64 // estimated, on the server's clock, µs
	mark   int64 // as reply.mark
	freed  bool  // released: no longer in heldByID
}

// heldSent bounds how many slots of held requests a reserve sends to
// Redis to place the L-th latest instant of the window among them.
const heldSent = 64

// latestHeld returns what a window's reserve script needs of the slots
// of the held requests to find the L-th latest instant of the window
// (limit L) among those recorded in Redis and those held: the j-th to the
// min(len(held), L)-th latest held slots, latest first, separated by
// spaces, and j (0 when none are held). Jitter may leave held slots out
// of arrival order. At most heldSent slots are sent; the script then
// bounds the instant from above (see lua/reserve_window.lua), which may
// only delay a request, never let the window hold more than L.
func latestHeld(held []*heldRequest, limit int) (int, string) {
	n := len(held)
	if n == 0 {
		return 0, ""
	}
	slots := make([]int64, n)
	ordered := true
	for i, h := range held {
		slots[i] = h.slot
		ordered = ordered && (i == 0 || slots[i-1] <= h.slot)
	}
	if !ordered {
		slices.Sort(slots)
	}
	last := min(n, limit) // the last-th latest held slot is the last sent
	first := max(1, last-heldSent+1)
	var b strings.Builder
	for j := first; j <= last; j++ {
		if j > first {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(slots[n-j], 10))
	}
	return first, b.String()
}

// holdLocked queues request id, whose slot is estimated wait away, in
// process. b.mu must be held.
func (s *Store) holdLocked(b *redisBudget, id uint64, r store.Request, rep reply) {
	h := &heldRequest{id: id, order: id, jitter: r.Jitter, slot: rep.now + micros(rep.wait), mark: rep.mark}
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

// nextHeld returns the index in held of the request to record next: the
// one whose slot comes first, the earliest arrival among equal slots.
// Jitter may leave a later arrival's slot earlier: recorded after one
// whose slot is later, it would find the window's latest instants ahead of
// its own and not fit where the memory store keeps it.
func nextHeld(held []*heldRequest) int {
	next := 0
	for i, h := range held {
		if h.slot < held[next].slot {
			next = i
		}
	}
	return next
}

// promoteDueLocked records in Redis, in the order of their slots, the held
// requests whose slots have come within one timespan. b.mu must be held.
func (s *Store) promoteDueLocked(ctx context.Context, b *redisBudget) error {
	for len(b.held) > 0 && s.due(b, b.held[nextHeld(b.held)]) {
		if err := s.promoteNextLocked(ctx, b); err != nil {
			return err
		}
	}
	s.schedulePromotionLocked(b)
	return nil
}

// promoteNextLocked records the next held request (see nextHeld) in Redis
// at the slot it was estimated, with its jitter, as the memory store would have kept
// it; at the earliest slot it now has, whatever the wait, only where what
// other processes recorded meanwhile leaves no room there. b.mu must be
// held.
func (s *Store) promoteNextLocked(ctx context.Context, b *redisBudget) error {
	if err := s.outageError(); err != nil {
		// Redis failed while this caller waited for b.mu: the calls
		// queued behind the lock must not each wait out the timeout.
		return err
	}
	i := nextHeld(b.held)
	h := b.held[i]
	rep, err := s.reserve(ctx, b, b.policy, store.Request{MaxWait: store.NoMaxWait, Jitter: h.jitter}, h.order, nil, store.NoMaxWait, h)
	if err != nil {
		return err
	}
	b.held = slices.Delete(b.held, i, i+1)
	if h.freed {
		return nil // recorded as a released slot, where it still fits
	}
	delete(b.heldByID, h.id)
	if rep.wait > 0 || b.policy.Strategy != store.StrategyLinear {
		// A window records the send instant: its Confirm moves it to when
		// the waiter really sends, should that be later.
		b.outstanding[h.id] = rep.record()
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
	// The requests held with earlier slots are due too: record them first.
	for b.heldByID[h.id] != nil {
		if err := s.promoteNextLocked(ctx, b); err != nil {
			return 0, err
		}
	}
	s.schedulePromotionLocked(b)
	delete(b.ready, h.id)
	return s.until(h.slot), nil
}

// releaseHeldLocked frees a held request that will not be used, keeping
// its slot for a newcomer. It reports whether id was held. b.mu must be
// held.
func (s *Store) releaseHeldLocked(b *redisBudget, id uint64) bool {
	h, ok := b.heldByID[id]
	if !ok {
		return false
	}
	delete(b.heldByID, id)
	h.freed = true
	return true
}

// claimHeldLocked gives request id, which the reserve script answered
// with rep, the earliest slot a held request of this process released, as
// the memory store gives a newcomer the earliest released slot from now
// up to its own slot before jitter, without jitter: refused when that
// slot lies beyond r.MaxWait. ok is false when there is none to claim.
// b.mu must be held.
func (s *Store) claimHeldLocked(b *redisBudget, id uint64, r store.Request, rep reply) (res store.Reservation, ok bool) {
	if rep.status == recorded {
		return store.Reservation{}, false // at once, or a slot released in Redis
	}
	var claim *heldRequest
	for _, h := range b.held {
		if h.freed && h.slot >= rep.now && h.slot <= rep.base && (claim == nil || h.slot < claim.slot) {
			claim = h
		}
	}
	if claim == nil {
		return store.Reservation{}, false
	}
	wait := time.Duration(claim.slot-rep.now) * time.Microsecond
	res = store.Reservation{OK: wait <= r.MaxWait, Wait: wait, Cooldown: rep.cooling}
	if !res.OK {
		return res, true
	}
	claim.id, claim.jitter, claim.freed = id, 0, false // keeping its place
	b.heldByID[id] = claim
	res.ID = id
	return res, true
}

// unholdLocked drops a held request that leaves without Redis (sent
// during an outage). It reports whether id was held. b.mu must be held.
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
// that ends at end (µs of the server's clock) and moved the recorded
// reservations by moved µs: by the same amount, or so that the earliest
// starts at its end when nothing recorded was ahead. b.mu must be held.
func (s *Store) shiftHeldLocked(b *redisBudget, end, moved int64) {
	if len(b.held) == 0 {
		return
	}
	delta := moved
	earliest := b.held[0].slot
	for _, h := range b.held {
		earliest = min(earliest, h.slot) // jitter may leave them out of order
	}
	if delta == 0 && earliest < end {
		delta = end - earliest
	}
	for _, h := range b.held {
		h.slot += delta
		h.mark += delta
	}
	s.schedulePromotionLocked(b)
}

// crowdHeldLocked moves the estimates of the held requests after a late
// send moved reservations recorded in Redis, tail being the instants of
// the L latest of them, in order: as the memory store moves the
// reservations a late send crowds, each held request, in time order,
// comes no earlier than the entry before it, nor than one timespan after
// the L-th entry before it. b.mu must be held.
func (s *Store) crowdHeldLocked(b *redisBudget, tail []int64) {
	if len(b.held) == 0 {
		return
	}
	limit, span := max(b.policy.Limit, 1), micros(max(b.policy.Timespan, time.Microsecond))
	held := slices.Clone(b.held)
	slices.SortStableFunc(held, func(x, y *heldRequest) int { return cmp.Compare(x.slot, y.slot) })
	// The entries in time order, those recorded first at the same instant.
	type entry struct {
		at int64
		h  *heldRequest
	}
	all := make([]entry, 0, len(tail)+len(held))
	i := 0
	for _, h := range held {
		for ; i < len(tail) && tail[i] <= h.slot; i++ {
			all = append(all, entry{at: tail[i]})
		}
		all = append(all, entry{at: h.slot, h: h})
	}
	moved := false
	for j := range all {
		x := &all[j]
		if x.h == nil || j == 0 {
			continue
		}
		want := all[j-1].at
		if j >= limit {
			want = max(want, all[j-limit].at+span)
		}
		if want > x.at {
			x.at, x.h.slot, moved = want, want, true
		}
	}
	if moved {
		s.schedulePromotionLocked(b)
	}
}

// schedulePromotionLocked arms the timer that promotes the next held
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
	in := max(s.until(b.held[nextHeld(b.held)].slot)-b.policy.Timespan, 0)
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
		if err := s.promoteDueLocked(context.Background(), b); err != nil {
			s.trip(err)
		}
	})
}
