package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// upkeepArgs are the arguments of lua/upkeep.lua.
func (s *Store) upkeepArgs(b *redisBudget, p store.Policy) []any { return s.args(b, p, true, 0) }

// upkept records the answer of an upkeep: the processes sharing the
// budget, and this one's rank among them.
func (s *Store) upkept(b *redisBudget, v any) {
	if a, ok := v.([]any); ok && len(a) == 2 {
		n, _ := a[0].(int64)
		rank, _ := a[1].(int64)
		s.counted(b, n, rank)
	}
}

// counted records the processes sharing the budget and this one's rank
// among them, when a script counted them (n > 0). The first count that
// finds others starts this process's join (see joinWait).
func (s *Store) counted(b *redisBudget, n, rank int64) {
	if n <= 0 {
		return
	}
	joining := n > 1 && b.procs.Load() == 0
	if joining {
		b.joinUntil.Store(s.localMicros() + micros(joinWait))
	}
	b.rank.Store(min(max(rank, 0), n-1))
	if b.procs.Swap(n) == 0 && joining {
		s.joined(b) // once, by the first count
	}
}

// refreshPresence runs, every presence interval, the upkeep of every
// budget on which this process has requests waiting, pipelined, so that
// the others know it is alive however long its requests wait, and the
// slots of departed processes go to its waiters.
func (s *Store) refreshPresence() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Presence)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.forgetIdle()
		if !s.down.Load() {
			if err := s.upkeepAll(); err != nil {
				s.trip(err)
			} else if err := s.reportSeats(); err != nil {
				s.trip(err)
			}
		}
	}
}

// forgetAfter is how long after its timespan a budget this process no
// longer uses is forgotten (its state in Redis expires by itself).
const forgetAfter = time.Minute

// forgetIdle forgets the budgets that have had no request for a timespan
// and forgetAfter and hold nothing of this process's, so that a process
// that talked to many API servers over time keeps no state for them. A
// request in flight on a budget has just marked it used.
func (s *Store) forgetIdle() {
	s.budgets.Range(func(k, v any) bool {
		b := v.(*redisBudget)
		b.mu.Lock()
		idle := len(b.outstanding) == 0 && len(b.held) == 0 && len(b.ready) == 0 &&
			time.Duration(s.localMicros()-b.lastUsed.Load())*time.Microsecond > b.policy.Timespan+forgetAfter
		if idle {
			s.budgets.Delete(k)
		}
		b.mu.Unlock()
		return true
	})
}

// upkeepBatch is how many upkeeps go in one pipeline.
const upkeepBatch = 256

// upkeepAll runs the upkeep of every budget with waiters, in pipelines.
func (s *Store) upkeepAll() error {
	var batch []*redisBudget
	var policies []store.Policy
	var err error
	s.budgets.Range(func(_, v any) bool {
		b := v.(*redisBudget)
		b.mu.Lock()
		p, busy := b.policy, len(b.outstanding) > 0 || len(b.held) > 0
		b.mu.Unlock()
		if !busy {
			return true
		}
		batch, policies = append(batch, b), append(policies, p)
		if len(batch) == upkeepBatch {
			err = s.upkeepPipelined(batch, policies)
			batch, policies = batch[:0], policies[:0]
		}
		return err == nil
	})
	if err == nil && len(batch) > 0 {
		err = s.upkeepPipelined(batch, policies)
	}
	return err
}

// upkeepPipelined runs the upkeep of budgets in one pipeline.
func (s *Store) upkeepPipelined(budgets []*redisBudget, policies []store.Policy) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	cmds, err := s.pipelined(ctx, scriptUpkeep, len(budgets), func(i int) ([]string, []any) {
		return budgets[i].keys, s.upkeepArgs(budgets[i], policies[i])
	})
	if err != nil {
		return err
	}
	for i, b := range budgets {
		s.upkept(b, cmds[i].Val())
	}
	return nil
}

// Close stops the store's background work and releases this process's
// reservations that are still ahead, so that the processes sharing its
// budgets can take their slots at once. A store made by NewFromURL
// closes its client too. Close is idempotent; the store must not be used
// after it.
func (s *Store) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		s.flushSent() // the sends made so far count where they left
		close(s.done)
		s.budgets.Range(func(_, v any) bool {
			b := v.(*redisBudget)
			b.mu.Lock()
			if b.timer != nil {
				b.timer.Stop()
			}
			b.held, b.heldByID, b.outstanding, b.ready = nil, map[uint64]*heldRequest{}, map[uint64]record{}, map[uint64]struct{}{}
			p := b.policy
			b.mu.Unlock()
			if s.down.Load() {
				return true
			}
			if _, err := s.call(context.Background(), scriptLeave, b, s.args(b, p, true, 0)); err != nil {
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
