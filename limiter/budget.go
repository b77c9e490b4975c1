package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/store"
)

// slowWait is how long a request may wait before it is logged; at most one
// such log line per budget per slowWait.
const slowWait = time.Second

// Budget is the budget of one API server, shared by every client of it.
// It is safe for concurrent use.
type Budget struct {
	l       *Engine
	key     string
	cluster atomic.Pointer[string]

	mu    sync.Mutex    // guards moved
	moved chan struct{} // closed and replaced when a cooldown moves reservations

	lastSlowLog atomic.Int64 // clock UnixNano of the last slow-wait log line

	seats    *seats    // nil without a concurrency limit
	exchange *exchange // nil without traffic classes
}

func newBudget(l *Engine, key, cluster string) *Budget {
	b := &Budget{l: l, key: key, moved: make(chan struct{}), seats: newSeats(l.concurrency, key, l.store, l.clock)}
	if b.seats != nil {
		b.seats.slotFirst = l.slotFirst()
	}
	if l.classes != nil {
		b.exchange = newExchange(*l.classes)
		if b.seats != nil {
			b.seats.fair = newFairShare(*l.classes)
		}
	}
	b.cluster.Store(&cluster)
	return b
}

// slotFirst reports whether a request that finds no seat free reserves its
// slot before it waits for one (see admitShared): with a window budget,
// whose store can move a send to where it left. Linear pacing takes the
// seat first: a send it let go late would crowd the next.
func (l *Engine) slotFirst() bool {
	return l.sender != nil && l.policy.Strategy != store.StrategyLinear
}

// SetCluster names the budget's cluster in errors, logs and metrics.
func (b *Budget) SetCluster(cluster string) {
	if *b.cluster.Load() != cluster {
		b.cluster.Store(&cluster)
	}
}

// Key returns the budget key, k8s:<owner>:<apiserver>.
func (b *Budget) Key() string { return b.key }

// Cluster returns the cluster name used in errors, logs and metrics.
func (b *Budget) Cluster() string { return *b.cluster.Load() }

// Wait takes one slot of the budget and returns when it has come. It
// takes no seat: it sees no response to give one back (the Transport
// does).
//
// The wait is decided before sleeping. When it would exceed the maximum
// wait (k8sratelimit.WithMaxWait, else the configured one), or end after the context's
// deadline, Wait fails at once with an *errors.RateLimitExceededError and
// reserves nothing. A context cancelled while waiting returns the context's
// error and releases the slot. After the Engine is closed, Wait fails with
// errors.ErrClosed.
//
// Its request is of the class WithClass sets on ctx, ClassRead if none.
func (b *Budget) Wait(ctx context.Context) error {
	return b.wait(ctx, nil)
}

// wait is Wait that also gives up, releasing its slot, when stop is closed.
func (b *Budget) wait(ctx context.Context, stop <-chan struct{}) error {
	_, err := b.admit(ctx, stop, false, classFromContext(ctx, ClassRead))
	return err
}

// admit takes a seat, when seated and the budget has a concurrency limit,
// then a slot, for a request of class c, and returns the seat once the
// request may leave: the store let it go, and so do this process's own
// sends (see ownSends). On failure it holds nothing.
func (b *Budget) admit(ctx context.Context, stop <-chan struct{}, seated bool, c Class) (seat, error) {
	l := b.l
	if l.isClosed() {
		return seat{}, errClosed
	}
	if err := ctx.Err(); err != nil {
		return seat{}, err
	}
	w := waitLimits{class: c}
	b.limits(ctx, &w)
	if l.own == nil {
		return b.admitStored(ctx, stop, &w, seated)
	}
	if w.start.IsZero() && w.limit != store.NoMaxWait {
		w.start = l.clock.Now() // what is left of the limit matters to the own slot
	}
	stored := w // what the store's admission spends stays its own
	st, err := b.admitStored(ctx, stop, &stored, seated)
	if err != nil {
		return seat{}, err
	}
	if err := b.ownSlot(ctx, stop, w); err != nil {
		st.unsend()
		st.free(outcomeUnsent)
		return seat{}, err
	}
	return st, nil
}

// admitStored is admit as the budget's store decides it.
func (b *Budget) admitStored(ctx context.Context, stop <-chan struct{}, w *waitLimits, seated bool) (seat, error) {
	l := b.l
	var st seat
	if seated && b.seats != nil {
		if l.slotFirst() {
			return b.admitShared(ctx, stop, *w)
		}
		var ok bool
		if st, ok = b.seats.tryTake(l.clock.Now(), w.class); !ok {
			var err error
			if st, err = b.waitSeat(ctx, stop, w, true); err != nil {
				return seat{}, err
			}
		}
	}
	if err := b.slot(ctx, stop, w, &st); err != nil {
		st.free(outcomeUnsent)
		return seat{}, err
	}
	st.send()
	return st, nil
}

// slot takes one slot of the budget and returns when it has come. A
// request holding the seat *st waits for room to send it (see sleep).
func (b *Budget) slot(ctx context.Context, stop <-chan struct{}, w *waitLimits, st *seat) error {
	l := b.l
	res, err := b.reserve(ctx, w, false)
	if err != nil {
		return err
	}
	if res.Wait == 0 {
		reason := WaitNone
		if w.seatWait > 0 {
			reason = WaitSeat
		}
		l.observer.Admitted(b.Cluster(), b.key, w.class, w.seatWait, reason)
		b.logSlow(w.seatWait, reason, w.class)
		return nil
	}
	return b.sleep(ctx, stop, res, *w, st)
}

// reserve reserves a slot within what is left of w's limit after the
// wait for a seat, to be confirmed even when it is now if deferred. A slot
// beyond the limit is refused with the typed error, and nothing is
// reserved.
func (b *Budget) reserve(ctx context.Context, w *waitLimits, deferred bool) (store.Reservation, error) {
	l := b.l
	maxWait := w.limit
	if w.seatWait > 0 && maxWait != store.NoMaxWait {
		maxWait = max(maxWait-w.seatWait, 0)
	}
	res, err := l.store.Reserve(ctx, b.key, l.policy, store.Request{MaxWait: maxWait, Jitter: l.drawJitter(), Deferred: deferred})
	if err != nil {
		return res, fmt.Errorf("k8sratelimit: budget %s: %w", b.key, err)
	}
	if !res.OK {
		if res.Wait <= maxWait {
			return res, b.refuseByStore(res.Wait, w.class)
		}
		return res, b.refuse(res.Wait, *w, slotWaitFor(res.Cooldown))
	}
	if l.shedsEvents(w.class) && res.Cooldown && res.Wait > 0 {
		// Events give way first: none waits out a cooldown.
		if res.ID != 0 {
			b.release(ctx, res.ID)
		}
		return store.Reservation{}, b.refuse(res.Wait, *w, rlerrors.WaitingForCooldown)
	}
	return res, nil
}

// slotWaitFor names what a request whose slot is ahead waits for: the
// end of a cooldown when the budget cools down, else a rate slot.
func slotWaitFor(cooldown bool) rlerrors.WaitingFor {
	if cooldown {
		return rlerrors.WaitingForCooldown
	}
	return rlerrors.WaitingForRateSlot
}

// waitLimits is how long a request may wait, and why.
type waitLimits struct {
	class      Class         // the request's
	start      time.Time     // read when needed: for a deadline, or on deferral
	limit      time.Duration // the tighter of max wait and deadline
	maxWait    time.Duration // the max wait in force, 0 when there is none
	byDeadline bool          // the context's deadline is the tighter limit
	seatWait   time.Duration // spent waiting for a seat
}

// limits sets *w, a zero waitLimits, to the limits of a request made
// with ctx.
func (b *Budget) limits(ctx context.Context, w *waitLimits) {
	w.limit = store.NoMaxWait
	if d, ok := b.l.maxWaitFor(ctx); ok {
		w.maxWait, w.limit = d, d
	}
	if b.l.shedsEvents(w.class) && EventMaxWait < w.limit {
		w.maxWait, w.limit = EventMaxWait, EventMaxWait
	}
	if dl, ok := ctx.Deadline(); ok {
		w.start = b.l.clock.Now()
		if left := max(dl.Sub(w.start), 0); left < w.limit {
			w.limit, w.byDeadline = left, true
		}
	}
}

// shedsEvents reports whether a request of class c gives way first: an
// event, with traffic classes.
func (l *Engine) shedsEvents(c Class) bool { return c == ClassEvent && l.classes != nil }

// deadline returns the instant w's limit ends, zero when there is none.
// w.start must be set.
func (w *waitLimits) deadline() time.Time {
	if w.limit == store.NoMaxWait {
		return time.Time{}
	}
	return w.start.Add(w.limit)
}

// refuse returns the error of a request whose slot is wait away, beyond
// the limits w, waiting for what.
func (b *Budget) refuse(wait time.Duration, w waitLimits, what rlerrors.WaitingFor) error {
	b.l.observer.Rejected(b.Cluster(), b.key, w.class, wait)
	e := &rlerrors.RateLimitExceededError{Cluster: b.Cluster(), Key: b.key, Wait: wait, MaxWait: w.maxWait, WaitingFor: what, Class: w.class.String()}
	if w.byDeadline {
		e.Err = context.DeadlineExceeded
	}
	return e
}

// refuseByStore returns the error of a request whose slot is wait away,
// within its limits, that the store refused by itself (package fake's
// scripted refusals): the error names no maximum wait and no deadline.
func (b *Budget) refuseByStore(wait time.Duration, c Class) error {
	b.l.observer.Rejected(b.Cluster(), b.key, c, wait)
	return &rlerrors.RateLimitExceededError{Cluster: b.Cluster(), Key: b.key, Wait: wait, ByStore: true, Class: c.String()}
}

// sleep waits for the slot of reservation res, confirming it when the
// timer fires or a cooldown moves it, until the store says go. A request
// that holds the seat *st (nil or the zero seat: none) is marked sent
// when it goes, once there is room for it among the requests in flight
// (see roomToSend); *st is then the seat it holds, the zero seat on
// failure.
func (b *Budget) sleep(ctx context.Context, stop <-chan struct{}, res store.Reservation, w waitLimits, st *seat) error {
	l := b.l
	if !l.addWaiter() {
		b.release(ctx, res.ID)
		return errClosed
	}
	defer l.waiters.Done()
	if w.start.IsZero() {
		// The decision was a moment ago; the start matters to moved slots.
		w.start = l.clock.Now()
	}

	wait := res.Wait
	var sl *sleeper // with traffic classes, once it sleeps
	for {
		if quit := b.pauseSlot(ctx, stop, &sl, &res, wait, w, st); quit != nil {
			b.release(ctx, res.ID)
			return quit
		}
		if st != nil {
			if err := b.roomToSend(ctx, stop, &w, st); err != nil {
				b.release(ctx, res.ID)
				return err
			}
		}
		left, err := l.store.Confirm(ctx, b.key, res.ID)
		if errors.Is(err, store.ErrUnknownReservation) && l.isClosed() {
			return errClosed
		}
		if err != nil {
			b.release(ctx, res.ID)
			return fmt.Errorf("k8sratelimit: budget %s: %w", b.key, err)
		}
		if left == 0 {
			waited := l.clock.Since(w.start)
			reason := b.reason(res.Cooldown, w.seatWait, waited)
			l.observer.Admitted(b.Cluster(), b.key, w.class, waited, reason)
			b.logSlow(waited, reason, w.class)
			return nil
		}
		if st != nil {
			st.unsend() // not yet
		}
		// The slot moved: give up now if it is out of reach.
		if l.clock.Since(w.start)+left > w.limit {
			b.release(ctx, res.ID)
			return b.refuse(left, w, slotWaitFor(res.Cooldown))
		}
		// Reservations also move after a late send or a departed process;
		// only a cooldown in force makes it the reason.
		if !res.Cooldown {
			cd, err := b.Cooldown(ctx)
			res.Cooldown = err == nil && cd > 0
		}
		wait = left
	}
}

// pauseSlot is pause for the slot of *res, trading it with the budget's
// other sleepers (see exchange) when it has traffic classes: *sl is the
// request's sleeper, made when first needed. A request that holds a seat
// (st) trades nothing: giving its slot away would keep the seat from the
// server all the longer.
func (b *Budget) pauseSlot(ctx context.Context, stop <-chan struct{}, sl **sleeper, res *store.Reservation, d time.Duration, w waitLimits, st *seat) error {
	if b.exchange == nil || d <= 0 || (st != nil && st.s != nil) {
		return b.pause(ctx, stop, d)
	}
	if *sl == nil {
		*sl = b.exchange.join(w.class, w.deadline())
	}
	return b.pauseTrading(ctx, stop, *sl, res, d, b.movedSignal())
}

// pause waits for d, or until a cooldown may have moved the waiter's
// slot, and returns why it gave up instead: ctx done, stop closed or the
// Engine closed. A slot that has come (d <= 0) needs no timer.
func (b *Budget) pause(ctx context.Context, stop <-chan struct{}, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return b.waitFor(ctx, stop, d, b.movedSignal())
}

// waitFor waits for d or until moved is closed (nil: never), and returns
// why it gave up instead: ctx done, stop closed or the Engine closed.
func (b *Budget) waitFor(ctx context.Context, stop <-chan struct{}, d time.Duration, moved <-chan struct{}) error {
	l := b.l
	timer := l.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C():
	case <-moved:
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopped
	case <-l.done:
		return errClosed
	}
	return nil
}

// reason says what a request that waited waited for: a cooldown when one
// was part of the wait, else whichever of its seat and its slot took
// longer.
func (b *Budget) reason(cooldown bool, seatWait, waited time.Duration) WaitReason {
	switch {
	case cooldown:
		return WaitCooldown
	case 2*seatWait > waited:
		return WaitSeat
	default:
		return WaitBudget
	}
}

// release gives back a reservation, also when ctx is already done.
func (b *Budget) release(ctx context.Context, id uint64) {
	if err := b.l.store.Release(context.WithoutCancel(ctx), b.key, id); err != nil {
		b.l.log.Error(err, "releasing a reservation", "budget", b.key)
	}
}

// movedSignal returns the channel closed at the next cooldown.
func (b *Budget) movedSignal() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.moved
}

// SetCooldown makes the whole budget send nothing for d, as after a
// server's 429 with Retry-After: d. It only ever extends a cooldown.
// Waiting requests are woken to look at their moved slots at once. It
// returns the cooldown left.
func (b *Budget) SetCooldown(ctx context.Context, d time.Duration) (time.Duration, error) {
	left, err := b.l.store.SetCooldown(ctx, b.key, b.l.policy, d)
	if err != nil {
		return 0, fmt.Errorf("k8sratelimit: budget %s: %w", b.key, err)
	}
	b.wake()
	return left, nil
}

// Cooldown returns the cooldown left on the budget, 0 when none, as its
// store reports it.
func (b *Budget) Cooldown(ctx context.Context) (time.Duration, error) {
	return b.l.store.Cooldown(ctx, b.key)
}

// wake makes every waiter of the budget confirm its slot at once: the
// store may have moved it.
func (b *Budget) wake() {
	b.mu.Lock()
	close(b.moved)
	b.moved = make(chan struct{})
	b.mu.Unlock()
}

// logSlow logs a wait longer than slowWait, at most once per slowWait per
// budget, naming the budget and what made it wait.
func (b *Budget) logSlow(waited time.Duration, reason WaitReason, c Class) {
	if waited <= slowWait {
		return
	}
	now := b.l.clock.Now().UnixNano()
	last := b.lastSlowLog.Load()
	if now-last < int64(slowWait) || !b.lastSlowLog.CompareAndSwap(last, now) {
		return
	}
	b.l.log.Info("Waited before sending a request", "waited", waited.Round(time.Millisecond),
		"reason", reason.String(), "class", c.String(), "cluster", b.Cluster(), "budget", b.key)
}

// Engine returns the Engine the budget belongs to.
func (b *Budget) Engine() *Engine { return b.l }
