package limiter

import (
	"context"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// admitShared is admit for a request that holds a seat, with a window
// budget whose store records a send where it left (a store.Sender: both
// stores; linear pacing records no send it could move). No seat is held across a wait
// for a slot, and none across a round trip to the store while requests
// wait for one, so that the seats are at the server's disposal and go to
// the requests in the order their slots come:
//
//   - A request that finds a seat free takes it and reserves its slot; it
//     leaves at once when the slot is now, else gives the seat back while
//     it waits for its slot (seatAtSlot).
//   - A request that finds none reserves its slot first, asking the store
//     to keep it to be confirmed (store.Request.Deferred). When the slot
//     is now, it waits for a seat and leaves at once, telling the store,
//     which records the send where it left in the background: until then
//     the send counts at its slot, a little earlier than it left, which
//     only ever delays others. A slot moved by a cooldown meanwhile, or
//     reserved a quarter of the timespan ago or more, is confirmed with the
//     store first, holding the seat. A slot ahead is waited for as above.
//
// On failure it holds nothing.
func (b *Budget) admitShared(ctx context.Context, stop <-chan struct{}, w waitLimits) (seat, error) {
	l := b.l
	if w.start.IsZero() {
		w.start = l.clock.Now()
	}
	if st, ok := b.seats.tryTake(w.start, w.class); ok {
		res, err := b.reserve(ctx, &w, false)
		if err != nil {
			st.free(outcomeUnsent)
			return seat{}, err
		}
		if res.Wait == 0 {
			l.observer.Admitted(b.Cluster(), b.key, w.class, 0, WaitNone)
			st.send()
			return st, nil
		}
		st.free(outcomeUnsent)
		return b.seatAtSlot(ctx, stop, res, w)
	}

	moved := b.movedSignal()
	res, err := b.reserve(ctx, &w, true)
	if err != nil {
		return seat{}, err
	}
	if res.Wait > 0 {
		return b.seatAtSlot(ctx, stop, res, w)
	}
	st, err := b.waitSeat(ctx, stop, &w, false)
	if err != nil {
		if res.ID != 0 {
			b.release(ctx, res.ID)
		}
		return seat{}, err
	}
	if res.ID != 0 && (isClosed(moved) || w.seatWait >= l.policy.Timespan/4) {
		return b.confirmSeated(ctx, stop, st, res, w)
	}
	st.send()
	if res.ID != 0 {
		l.sender.Sent(b.key, res.ID)
	}
	l.observer.Admitted(b.Cluster(), b.key, w.class, w.seatWait, WaitSeat)
	b.logSlow(w.seatWait, WaitSeat, w.class)
	return st, nil
}

// seatAtSlot waits for the slot of res, ahead, holding no seat, then for
// a seat, and confirms the slot with the store holding it.
func (b *Budget) seatAtSlot(ctx context.Context, stop <-chan struct{}, res store.Reservation, w waitLimits) (seat, error) {
	if err := b.awaitSlot(ctx, stop, &res, w); err != nil {
		b.release(ctx, res.ID)
		return seat{}, err
	}
	st, err := b.waitSeat(ctx, stop, &w, false)
	if err != nil {
		b.release(ctx, res.ID)
		return seat{}, err
	}
	return b.confirmSeated(ctx, stop, st, res, w)
}

// confirmSeated confirms the slot of res, which has come or moved, with
// the store, holding the seat st, and returns it when the store says go.
func (b *Budget) confirmSeated(ctx context.Context, stop <-chan struct{}, st seat, res store.Reservation, w waitLimits) (seat, error) {
	res.Wait = 0
	if err := b.sleep(ctx, stop, res, w, &st); err != nil {
		st.free(outcomeUnsent)
		return seat{}, err
	}
	st.send()
	return st, nil
}

// await waits for d, until ctx is done, stop is closed or the Engine is
// closed, counted among the Engine's waiters.
func (b *Budget) await(ctx context.Context, stop <-chan struct{}, d time.Duration) error {
	l := b.l
	if !l.addWaiter() {
		return errClosed
	}
	defer l.waiters.Done()
	return b.waitFor(ctx, stop, d, nil)
}

// awaitSlot waits for the slot of *res, res.Wait away, holding no seat,
// trading it with the budget's other sleepers (see exchange) when it has
// traffic classes.
func (b *Budget) awaitSlot(ctx context.Context, stop <-chan struct{}, res *store.Reservation, w waitLimits) error {
	if b.exchange == nil || res.Wait <= 0 {
		return b.await(ctx, stop, res.Wait)
	}
	l := b.l
	if !l.addWaiter() {
		return errClosed
	}
	defer l.waiters.Done()
	return b.pauseTrading(ctx, stop, b.exchange.join(w.class, w.deadline()), res, res.Wait, nil)
}

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
