package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// A call made for a request (its Reserve, its waiter's Confirm, its
// Release) is bounded by what is left of the request's max wait, but
// never below callFloor — a round trip is not a wait: with max wait 0 a
// healthy Redis still decides — and never beyond the store's Timeout. A
// call cut short by that bound, not by the Timeout, decides its request
// by the failure policy without starting an outage: one request's short
// bound does not declare Redis down for everyone. A background check
// then asks Redis, with the full Timeout, to count what was decided
// without it; if Redis does not answer within the Timeout either, the
// outage starts then.
const callFloor = 50 * time.Millisecond

// untilKey is the context key of the local µs by which the request a
// call is made for must be decided.
type untilKey struct{}

// withUntil marks ctx as the context of calls for a request to decide by
// µs until of the local clock (0: the store's Timeout bounds them).
func withUntil(ctx context.Context, until int64) context.Context {
	if until == 0 {
		return ctx
	}
	return context.WithValue(ctx, untilKey{}, until)
}

// untilFor returns the local µs by which a request with max wait maxWait,
// asked now, must be decided; 0 when the store's Timeout comes first.
func (s *Store) untilFor(maxWait time.Duration) int64 {
	if maxWait >= s.opts.Timeout {
		return 0
	}
	return s.localMicros() + micros(max(maxWait, 0))
}

// callBound returns how long a call with ctx may take, and whether that
// is shorter than the store's Timeout because of its request's bound.
func (s *Store) callBound(ctx context.Context) (time.Duration, bool) {
	until, _ := ctx.Value(untilKey{}).(int64)
	if until == 0 {
		return s.opts.Timeout, false
	}
	d := max(time.Duration(until-s.localMicros())*time.Microsecond, callFloor)
	if d >= s.opts.Timeout {
		return s.opts.Timeout, false
	}
	return d, true
}

// timedOut reports whether err is a call's running out of time, not a
// refusal such as a connection refused by a Redis that is gone: that one
// starts the outage at once.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// cutShortError is the error of a call cut short by its request's bound.
type cutShortError struct{ err error }

func (e *cutShortError) Error() string {
	return "store: redis call cut short by the request's max wait: " + e.err.Error()
}

func (e *cutShortError) Unwrap() error { return e.err }

// failedFor is failed for a call made for a request: a call cut short by
// the request's own bound is decided by cut, and Redis is checked in the
// background, instead of starting an outage.
func failedFor[T any](s *Store, ctx context.Context, err error, fallback, cut func() (T, error)) (T, error) {
	var c *cutShortError
	if ctx.Err() == nil && errors.As(err, &c) {
		s.event(store.Event{Type: store.EventError, Err: err})
		return cut()
	}
	return failed(s, ctx, err, fallback)
}

// cutQueue holds what requests decided without Redis's answer left for
// Redis to learn, and runs one check at a time (see checkCut).
type cutQueue struct {
	mu      sync.Mutex
	sends   map[*redisBudget][]int64  // sends Redis does not count, local µs
	forget  map[*redisBudget][]string // reservations no request will use, by member
	first   int64                     // the earliest of sends, local µs; 0: none
	running bool
}

// cutSend queues a send that Redis must learn, and starts a check.
func (s *Store) cutSend(b *redisBudget, at int64) {
	q := &s.cutQ
	q.mu.Lock()
	if q.sends == nil {
		q.sends = map[*redisBudget][]int64{}
	}
	q.sends[b] = append(q.sends[b], at)
	if q.first == 0 || at < q.first {
		q.first = at
	}
	q.mu.Unlock()
	s.checkCut()
}

// cutForget queues a reservation Redis may hold for a request that will
// not use it, to release, and starts a check.
func (s *Store) cutForget(b *redisBudget, member string) {
	q := &s.cutQ
	q.mu.Lock()
	if q.forget == nil {
		q.forget = map[*redisBudget][]string{}
	}
	q.forget[b] = append(q.forget[b], member)
	q.mu.Unlock()
	s.checkCut()
}

// checkCut starts the background check unless it runs.
func (s *Store) checkCut() {
	q := &s.cutQ
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	q.running = true
	s.wg.Add(1)
	go s.settleCuts()
}

// settleCuts tells Redis, with the store's Timeout, what the queue holds,
// until it is empty. When Redis fails to answer, the outage starts, from
// the first send queued: its end teaches Redis those sends too. It ends
// when the queue is empty, Redis failed, or the store is closed.
func (s *Store) settleCuts() {
	defer s.wg.Done()
	q := &s.cutQ
	for {
		q.mu.Lock()
		sends, forget, first := q.sends, q.forget, q.first
		q.sends, q.forget, q.first = nil, nil, 0
		if len(sends)+len(forget) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if err := s.settle(sends, forget); err != nil {
			s.trip(err)
		}
		if s.down.Load() && first != 0 && first < s.downSince.Load() {
			s.downSince.Store(first) // its end teaches Redis those sends
		}
	}
}

// settle records sends in Redis and releases the reservations of
// forget, in a call bounded by the store's Timeout.
func (s *Store) settle(sends map[*redisBudget][]int64, forget map[*redisBudget][]string) error {
	if s.down.Load() {
		return nil // the end of the outage teaches Redis the sends
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	var keys [][]string
	var args [][]any
	if len(sends) > 0 {
		skew, err := s.skewNow(ctx)
		if err != nil {
			return err
		}
		for b, at := range sends {
			p := b.currentPolicy()
			if p.Strategy == store.StrategyLinear {
				continue
			}
			a := append(s.args(b, p, false, 1+len(at)), 0)
			for _, x := range at {
				a = append(a, x+skew)
			}
			keys, args = append(keys, b.keys), append(args, a)
		}
		if _, err := s.pipelined(ctx, scriptLearn, len(keys), func(i int) ([]string, []any) { return keys[i], args[i] }); err != nil {
			return err
		}
	}
	keys, args = keys[:0], args[:0]
	for b, members := range forget {
		p := b.currentPolicy()
		for _, m := range members {
			keys, args = append(keys, b.keys), append(args, append(s.args(b, p, false, 1), m))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := s.pipelined(ctx, scriptRelease, len(keys), func(i int) ([]string, []any) { return keys[i], args[i] })
	return err
}

// decideCut decides request r, id, whose Reserve was cut short by its own
// bound, by the failure policy, for this request alone: open admits,
// closed refuses with the call's error, and local admits at once when
// this process's share has room for it among the sends it made in the
// last timespan, else refuses with the wait the share would take. Redis
// may have recorded the reservation without its answer reaching here: it
// is released in the background (a slot taken at once only counts, which
// may delay others, never lets more through), and an admitted send is
// taught to Redis.
func (s *Store) decideCut(b *redisBudget, p store.Policy, r store.Request, id uint64, cause error) (store.Reservation, error) {
	s.event(store.Event{Type: store.EventFallback, Policy: s.opts.Failure})
	s.cutForget(b, s.member(id))
	switch s.opts.Failure {
	case store.FailureClosed:
		return store.Reservation{}, s.closedError(cause)
	case store.FailureOpen:
		s.cutSend(b, s.sent(b, p))
		return store.Reservation{OK: true}, nil
	}
	share := s.share(b.key, p)
	now := s.localMicros()
	local := memorystore.New(nil)
	seedSends(local, b.key, share, now, b.sends.since(now-micros(p.Timespan)))
	res, err := local.Reserve(context.Background(), b.key, share, store.Request{})
	if err != nil || !res.OK {
		return store.Reservation{Wait: res.Wait}, err
	}
	s.cutSend(b, s.sent(b, p))
	return store.Reservation{OK: true}, nil
}

// confirmCut answers the Confirm of reservation id, recorded as rec, that
// its request's bound cut short: its slot has come, so it is sent, unless
// the policy is FailureClosed. Either way Redis is told in the
// background: the send where it left, or the reservation released.
func (s *Store) confirmCut(b *redisBudget, id uint64, rec record, cause error) (time.Duration, error) {
	s.event(store.Event{Type: store.EventFallback, Policy: s.opts.Failure})
	b.mu.Lock()
	_, mine := b.outstanding[id]
	delete(b.outstanding, id)
	p := b.policy
	b.mu.Unlock()
	if !mine {
		return 0, store.ErrUnknownReservation
	}
	if s.opts.Failure == store.FailureClosed {
		s.cutForget(b, rec.member)
		return 0, s.closedError(cause)
	}
	s.sentLate(b, p, rec, 0)
	s.cutSend(b, s.localMicros())
	return 0, nil
}
