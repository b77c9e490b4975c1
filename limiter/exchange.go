package limiter

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// exchange shares a budget's rate slots among the classes of the requests
// of this process that wait for theirs. The store reserves slots in the
// order requests come, and decides each request's wait before it sleeps,
// exactly; the exchange then lets the sleepers trade them. When the slot
// of a sleeper comes, the class whose turn it is (see fairShare) among
// its own and those of the other sleepers sends in it: the first sleeper
// of that class takes the slot that has come, and gives the sleeper
// whose slot it was its own, later one. A trade never moves a slot
// beyond the limits the request was decided with (its maximum wait, its
// deadline), so that every decision made before sleeping holds; and the
// slots, their instants and their number are the store's, so that the
// budget stays exact across processes, each trading only its own.
type exchange struct {
	mu     sync.Mutex
	fair   *fairShare
	parked [NumClasses]list.List // *sleeper, by arrival
	seq    uint64                // arrivals so far
}

// sleeper is a request waiting for its slot, seen by the exchange.
type sleeper struct {
	class    Class
	seq      uint64            // its arrival among sleepers
	deadline time.Time         // its slot may not move past it; zero: no limit
	res      store.Reservation // the reservation it holds
	slot     time.Time         // when the slot of res comes
	elem     *list.Element     // its place while parked
	handed   bool              // another gave it a slot that has come
	wake     chan struct{}     // signalled when handed
}

func newExchange(w Weights) *exchange {
	return &exchange{fair: newFairShare(w)}
}

// join returns the sleeper of a request of class c, which may wait until
// deadline at most (zero: no limit).
func (x *exchange) join(c Class, deadline time.Time) *sleeper {
	x.mu.Lock()
	x.seq++
	seq := x.seq
	x.mu.Unlock()
	return &sleeper{class: c, seq: seq, deadline: deadline, wake: make(chan struct{}, 1)}
}

// park puts s among the sleepers, holding res, whose slot comes at slot.
// x.mu must be held.
func (x *exchange) parkLocked(s *sleeper, res store.Reservation, slot time.Time) {
	s.res, s.slot = res, slot
	l := &x.parked[s.class]
	for e := l.Back(); e != nil; e = e.Prev() {
		if e.Value.(*sleeper).seq < s.seq {
			s.elem = l.InsertAfter(s, e)
			return
		}
	}
	s.elem = l.PushFront(s)
}

// unparkLocked takes s out of the sleepers. x.mu must be held.
func (x *exchange) unparkLocked(s *sleeper) {
	if s.elem != nil {
		x.parked[s.class].Remove(s.elem)
		s.elem = nil
	}
}

// slotCameLocked decides who sends in the slot of s, which has come at
// now: the first sleeper, in order of arrival, of the class whose turn it
// is, among s's class and those of the other sleepers. When that is not
// s, it is handed the slot, and s takes its later one; a sleeper whose
// slot would then lie beyond s's deadline is passed over. It reports
// whether s gave its slot away and must wait on. x.mu must be held.
func (x *exchange) slotCameLocked(s *sleeper, now time.Time) bool {
	c, _ := x.fair.pick(waitingIn(&x.parked).with(s.class))
	for e := x.parked[c].Front(); e != nil; e = e.Next() {
		o := e.Value.(*sleeper)
		if o.class == s.class && o.seq > s.seq {
			break // s comes first in its class
		}
		if !o.slot.After(now) || (!s.deadline.IsZero() && o.slot.After(s.deadline)) {
			continue
		}
		x.unparkLocked(o)
		s.res, o.res = o.res, s.res
		s.slot, o.slot = o.slot, now
		o.handed = true
		select {
		case o.wake <- struct{}{}:
		default:
		}
		x.fair.charge(c)
		return true
	}
	x.fair.charge(s.class)
	return false
}

// pauseTrading waits for the slot of *res, d away, as the sleeper s: it
// returns nil when the slot has come, in *res (another sleeper's, when s
// was handed one) or when moved is closed (nil: never), else why it gave
// up (ctx done, stop closed, the Engine closed), *res then being the
// reservation to release.
func (b *Budget) pauseTrading(ctx context.Context, stop <-chan struct{}, s *sleeper, res *store.Reservation, d time.Duration, moved <-chan struct{}) error {
	l, x := b.l, b.exchange
	for d > 0 {
		x.mu.Lock()
		x.parkLocked(s, *res, l.clock.Now().Add(d))
		x.mu.Unlock()

		var quit error
		fired := false
		timer := l.clock.NewTimer(d)
		select {
		case <-timer.C():
			fired = true
		case <-s.wake:
		case <-moved:
		case <-ctx.Done():
			quit = ctx.Err()
		case <-stop:
			quit = errStopped
		case <-l.done:
			quit = errClosed
		}
		timer.Stop()

		x.mu.Lock()
		d = 0
		switch {
		case s.handed:
			s.handed = false
			select {
			case <-s.wake:
			default:
			}
		case fired:
			x.unparkLocked(s)
			if now := l.clock.Now(); x.slotCameLocked(s, now) {
				d = s.slot.Sub(now)
			}
		default:
			x.unparkLocked(s)
		}
		*res = s.res
		x.mu.Unlock()
		if quit != nil {
			return quit
		}
	}
	return nil
}
