package limiter

import (
	"container/list"
	"context"
	"errors"
	"time"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// waitSeat waits in line for a seat of the budget, for a request that
// found none free. It records the time spent waiting in w.
//
// How long a seat takes to come cannot be known in advance: it depends on
// how long the requests holding the seats take. The wait is therefore
// refused at once only when it is sure to exceed w's limit (a request that
// may not wait, or, with checkCooldown, a cooldown longer than the limit,
// which every seat holder waits out first; a request whose slot is
// reserved already has had the cooldown counted there), and otherwise
// given up when the limit is reached, with an estimate of the wait left as
// RetryAfter.
func (b *Budget) waitSeat(ctx context.Context, stop <-chan struct{}, w *waitLimits, checkCooldown bool) (seat, error) {
	l := b.l
	now := l.clock.Now()
	if w.start.IsZero() {
		w.start = now
	}
	var cooldown time.Duration
	if checkCooldown {
		cooldown = b.cooldownLeft(ctx)
	}
	if w.limit == 0 || cooldown > w.limit {
		// A seat may have come free since the caller looked: with a
		// shared store, a round trip ago, which may also have counted
		// the processes sharing the limit, and so made this process's
		// share.
		if cooldown == 0 {
			if st, ok := b.seats.tryTake(now, w.class); ok {
				return st, nil
			}
		}
		return seat{}, b.refuseSeat(cooldown, *w)
	}
	if !l.addWaiter() {
		return seat{}, errClosed
	}
	defer l.waiters.Done()

	sw, e := b.seats.enqueue(l.clock.Now(), w.class)
	return b.inLine(ctx, stop, w, sw, e)
}

// inLine waits for the seat of waiter sw, queued at e, within w's limit.
func (b *Budget) inLine(ctx context.Context, stop <-chan struct{}, w *waitLimits, sw *seatWaiter, e *list.Element) (seat, error) {
	l := b.l
	var timeout <-chan time.Time
	if w.limit != store.NoMaxWait && !w.byDeadline {
		// A deadline needs no timer: the context is done at the deadline.
		timer := l.clock.NewTimer(w.limit - l.clock.Since(w.start))
		defer timer.Stop()
		timeout = timer.C()
	}
	var quit error
	select {
	case <-sw.ready:
		w.seatWait = l.clock.Since(w.start)
		return sw.seat, nil
	case <-timeout:
		quit = b.refuseSeat(b.cooldownLeft(ctx), *w)
	case <-ctx.Done():
		quit = ctx.Err()
		if w.byDeadline && errors.Is(quit, context.DeadlineExceeded) {
			quit = b.refuseSeat(b.cooldownLeft(ctx), *w)
		}
	case <-stop:
		quit = errStopped
	case <-l.done:
		quit = errClosed
	}
	if st, got := b.seats.leave(sw, e, l.clock.Now()); got {
		st.free(outcomeUnsent)
	}
	return seat{}, quit
}

// refuseSeat refuses a request that waits for a seat, with the budget's
// cooldown left: it waits for whichever of the seat and the cooldown's
// end comes later.
func (b *Budget) refuseSeat(cooldown time.Duration, w waitLimits) error {
	seat := b.seats.estimate()
	if cooldown >= seat {
		return b.refuse(cooldown, w, rlerrors.WaitingForCooldown)
	}
	return b.refuse(seat, w, rlerrors.WaitingForSeat)
}

// cooldownLeft returns the cooldown left on the budget, 0 when none or
// when the store cannot say.
func (b *Budget) cooldownLeft(ctx context.Context) time.Duration {
	d, err := b.Cooldown(context.WithoutCancel(ctx))
	if err != nil {
		return 0
	}
	return d
}

// Seats returns the budget's concurrency limit and its use; the zero
// SeatStatus when it has none.
func (b *Budget) Seats() SeatStatus {
	if b.seats == nil {
		return SeatStatus{}
	}
	return b.seats.status()
}

// roomToSend marks the request holding *st as sent, once fewer requests
// are in flight than the limit allows. A cut since the seat was taken
// can leave more seats held than that (requests that waited for their
// slot, through a cooldown, holding one): this one then gives its seat
// back and waits for the next, first in line, so that the requests
// released together when the cooldown ends leave at the limit, not at
// the limit before the cut. *st is then the new seat, or the zero seat
// on failure. The caller is counted among the Engine's waiters.
func (b *Budget) roomToSend(ctx context.Context, stop <-chan struct{}, w *waitLimits, st *seat) error {
	for !st.trySend() {
		sw, e := st.s.requeue(*st, b.l.clock.Now())
		ns, err := b.inLine(ctx, stop, w, sw, e)
		*st = ns
		if err != nil {
			return err
		}
	}
	return nil
}
