package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// probeEvery is how often a store in an outage checks whether Redis
// answers again.
const probeEvery = time.Second

// trip starts an outage after a failed call, once: the failure policy
// applies until a background probe finds Redis answering again.
func (s *Store) trip(err error) {
	s.lastErr.Store(&err)
	s.event(store.Event{Type: store.EventError, Err: err})
	if !s.down.CompareAndSwap(false, true) {
		return
	}
	s.outages.Add(1)
	s.downSince.Store(s.localMicros())
	s.nextProbe.Store(s.localMicros() + int64(probeEvery/time.Microsecond))
	cause := Cause(err)
	s.cause.Store(&cause)
	s.log.Error(err, "Redis store unavailable; deciding by the failure policy until it answers",
		"redis", s.url, "cause", cause, "policy", s.opts.Failure)
	s.event(store.Event{Type: store.EventDown, Policy: s.opts.Failure, Err: err})
	select {
	case <-s.done:
		return
	default:
	}
	s.wg.Add(1)
	go s.probe()
}

// probe asks Redis about once a second whether it can be used again
// (it answers and runs the store's scripts), then ends the outage.
func (s *Store) probe() {
	defer s.wg.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.nextProbe.Store(s.localMicros() + int64(probeEvery/time.Microsecond))
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		err := s.checkUsable(ctx) // it answers, and runs scripts
		cancel()
		if err == nil {
			err = s.endOutage()
		}
		if err != nil {
			s.lastErr.Store(&err)
			s.reportCause(err)
			continue
		}
		s.log.Info("Redis store available again; budgets are shared again", "redis", s.url)
		s.event(store.Event{Type: store.EventUp})
		return
	}
}

// reportCause reports, during an outage, that its cause changed (Redis
// answers again, but refuses the password, say): once per change, not
// once per probe.
func (s *Store) reportCause(err error) {
	cause := Cause(err)
	if p := s.cause.Load(); p != nil && *p == cause {
		return
	}
	s.cause.Store(&cause)
	s.log.Error(err, "Redis store still unavailable, for another cause", "redis", s.url, "cause", cause, "policy", s.opts.Failure)
}

// endOutage records in Redis what this process sent during the outage and
// then lets the shared budgets decide again. The local decisions wait
// meanwhile (see decideLocally), so that no send slips between what Redis
// learns and the switch: this is the one lock of the store held across a
// network call, for at most the store's timeout, once per outage.
func (s *Store) endOutage() error {
	s.failover.Lock()
	defer s.failover.Unlock()
	if err := s.learnOutageSends(s.downSince.Load()); err != nil {
		return err
	}
	s.down.Store(false)
	return nil
}

// decideLocally runs decide, a decision of the failure policy, and
// reports true, unless the outage has ended meanwhile: then the shared
// budget must decide, and it reports false. The sends that decide records
// are thus either learned by Redis on the way back or decided by it.
func (s *Store) decideLocally(decide func()) bool {
	s.failover.RLock()
	defer s.failover.RUnlock()
	if !s.down.Load() {
		return false
	}
	decide()
	return true
}

func (s *Store) event(e store.Event) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}

// outageError returns the error that started the outage under way, nil
// when Redis answers.
func (s *Store) outageError() error {
	if !s.down.Load() {
		return nil
	}
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return errors.New("store: redis unavailable")
}

// minRetryAfter is the least RetryAfter of a request refused by
// FailureClosed, so that a caller honouring it never spins.
const minRetryAfter = 100 * time.Millisecond

// storeError returns the error of a request refused by FailureClosed in
// an outage, wrapping the error that started it.
func (s *Store) storeError() error {
	err := fmt.Errorf("unknown error")
	if p := s.lastErr.Load(); p != nil {
		err = *p
	}
	return s.closedError(err)
}

// closedError returns the error of a request refused by FailureClosed
// because of the Redis error err. Its RetryAfter is the time until the
// next background probe of Redis, at least minRetryAfter.
func (s *Store) closedError(err error) error {
	retry := time.Duration(s.nextProbe.Load()-s.localMicros()) * time.Microsecond
	return &unavailableError{err: err, retryAfter: max(retry, minRetryAfter)}
}

// unavailableError is the error of a request refused by FailureClosed
// while Redis cannot be reached. It wraps the Redis error and implements
// errors.HasRetryAfter.
type unavailableError struct {
	err        error
	retryAfter time.Duration
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("store: redis unavailable (store failure policy %q, retry after %s): %v",
		store.FailureClosed, e.retryAfter.Round(time.Millisecond), e.err)
}

func (e *unavailableError) Unwrap() error { return e.err }

// RetryAfter returns how long until the store next checks whether Redis
// answers again, at least minRetryAfter.
func (e *unavailableError) RetryAfter() time.Duration { return e.retryAfter }

// failed handles a failed call: the caller's own cancellation is passed
// on, anything else starts an outage and the call is decided by the
// failure policy through fallback.
func failed[T any](s *Store, ctx context.Context, err error, fallback func() (T, error)) (T, error) {
	if cerr := ctx.Err(); cerr != nil {
		var zero T
		return zero, cerr
	}
	s.trip(err)
	return fallback()
}

// fallbackReserve decides a request by the failure policy.
func (s *Store) fallbackReserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	s.event(store.Event{Type: store.EventFallback, Policy: s.opts.Failure})
	switch s.opts.Failure {
	case store.FailureOpen:
		return store.Reservation{OK: true}, nil
	case store.FailureClosed:
		return store.Reservation{}, s.storeError()
	}
	b := s.budget(key)
	var res store.Reservation
	var err error
	local := s.decideLocally(func() {
		share := s.share(key, p)
		s.seedFallback(key, b, share)
		res, err = s.fallback.Reserve(ctx, key, share, r)
		switch {
		case err != nil || !res.OK:
		case res.ID != 0:
			res.ID |= fallbackID
		default:
			s.sent(b, p)
		}
	})
	if !local {
		return s.Reserve(ctx, key, p, r) // Redis answers again
	}
	return res, err
}

// share returns this process's share of policy p on the budget key: the
// limit divided by the processes last seen sharing it.
func (s *Store) share(key string, p store.Policy) store.Policy {
	n := 1
	if b, ok := s.existing(key); ok {
		n = int(max(b.procs.Load(), 1))
	}
	p.Limit = max(p.Limit/n, 1)
	if p.Burst > p.Limit {
		p.Burst = p.Limit
	}
	return p
}

// confirmDuringOutage answers the Confirm of a reservation recorded in
// Redis while Redis cannot be asked: its wait is over (a waiter confirms
// at its slot). With FailureLocal it is sent when this process's share
// has room for it now, and otherwise told how long until it has, to
// confirm again then, its reservation kept: the waiters whose slots came
// during the outage do not all leave at once. With FailureOpen it is
// sent; with FailureClosed refused. A request still held in-process keeps
// waiting for its estimated slot.
func (s *Store) confirmDuringOutage(b *redisBudget, id uint64) (time.Duration, error) {
	b.mu.Lock()
	if h, ok := b.heldByID[id]; ok {
		if left := s.until(h.slot); left > 0 {
			b.mu.Unlock()
			return left, nil
		}
	}
	p := b.policy
	b.mu.Unlock()
	switch s.opts.Failure {
	case store.FailureClosed:
		s.forgetReservation(b, id)
		return 0, s.storeError()
	case store.FailureOpen:
		s.sentLate(b, p, s.forgetReservation(b, id), 0)
		return 0, nil
	}
	var left time.Duration
	local := s.decideLocally(func() {
		share := s.share(b.key, p)
		s.seedFallback(b.key, b, share)
		res, _ := s.fallback.Reserve(context.Background(), b.key, share, store.Request{})
		if !res.OK {
			left = max(res.Wait, time.Millisecond)
			return
		}
		s.sentLate(b, p, s.forgetReservation(b, id), 0)
	})
	if !local {
		// Redis answers again, and decides.
		return s.confirm(context.Background(), b, id, 0)
	}
	return left, nil
}

// forgetReservation drops reservation id, held in-process or recorded in
// Redis, and returns its record (none for a held one: Redis has none).
func (s *Store) forgetReservation(b *redisBudget, id uint64) record {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.unholdLocked(b, id)
	rec := b.outstanding[id]
	delete(b.outstanding, id)
	return rec
}
