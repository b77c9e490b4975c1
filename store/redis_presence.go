package store

import (
	"context"
	"errors"
	"time"
)

// refreshPresence refreshes, every Presence interval, this process's
// presence on each budget it used within the last timespan or still holds
// reservations on, so that the others know it is alive however long its
// requests wait.
func (s *Redis) refreshPresence() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Presence)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if s.down.Load() {
			continue
		}
		s.budgets.Range(func(_, v any) bool {
			b := v.(*redisBudget)
			b.mu.Lock()
			p, busy := b.policy, len(b.outstanding) > 0 || len(b.held) > 0
			b.mu.Unlock()
			if !busy && time.Duration(s.localµs()-b.lastUsed.Load())*time.Microsecond > p.Timespan+s.ttl {
				return true
			}
			v2, err := s.call(context.Background(), scriptPing, b, s.args(p))
			if err != nil {
				s.trip(err)
				return false
			}
			b.procs.Store(max(v2.(int64), 1))
			return true
		})
	}
}

// Close stops the store's background work and releases this process's
// reservations that are still ahead, so that the processes sharing its
// budgets can take their slots at once. A store made by NewRedisFromURL
// closes its client too. Close is idempotent; the store must not be used
// after it.
func (s *Redis) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		close(s.done)
		s.budgets.Range(func(_, v any) bool {
			b := v.(*redisBudget)
			b.mu.Lock()
			if b.timer != nil {
				b.timer.Stop()
			}
			b.held, b.heldByID, b.outstanding, b.ready = nil, map[uint64]*heldRequest{}, map[uint64]struct{}{}, map[uint64]struct{}{}
			p := b.policy
			b.mu.Unlock()
			if s.down.Load() {
				return true
			}
			if _, err := s.call(context.Background(), scriptLeave, b, s.args(p)); err != nil {
				errs = append(errs, err)
			}
			return true
		})
		s.closeNotifier()
		s.wg.Wait()
		if s.ownClient {
			errs = append(errs, s.client.Close())
		}
	})
	return errors.Join(errs...)
}
