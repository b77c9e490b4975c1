package redisstore

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// sendLog is what one process sent on a budget in the last timespan, in
// the order sent: the instants, µs of the store's local clock. It is what
// keeps the budget exact across an outage: the local budget that takes
// over starts from it, and the shared budget learns the sends made in the
// outage when Redis answers again.
type sendLog struct {
	mu  sync.Mutex
	at  []int64
	cap int // keep at most this many: the limit of a window
}

// add records a send at µs now, keeping those of the last span µs.
func (l *sendLog) add(now, span int64, limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cap = max(limit, 1)
	i := 0
	for i < len(l.at) && (l.at[i] <= now-span || len(l.at)-i >= l.cap) {
		i++
	}
	l.at = append(l.at[:0], l.at[i:]...)
	l.at = append(l.at, now)
}

// move moves the send logged at µs from to µs to, later: a request
// admitted at once, logged at its slot, that left when it had a seat. A
// send no longer logged is logged at to.
func (l *sendLog) move(from, to int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.at, from); i >= 0 {
		l.at = slices.Delete(l.at, i, i+1)
	}
	j, _ := slices.BinarySearch(l.at, to)
	l.at = slices.Insert(l.at, j, to)
}

// since returns the sends at or after µs from.
func (l *sendLog) since(from int64) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, at := range l.at {
		if at >= from {
			out := make([]int64, len(l.at)-i)
			copy(out, l.at[i:])
			return out
		}
	}
	return nil
}

// seedSends starts the local budget key of m under p from sends, µs of
// the store's local clock, on which it is now µs now.
func seedSends(m *memorystore.Store, key string, p store.Policy, now int64, sends []int64) {
	ago := make([]time.Duration, len(sends))
	for i, at := range sends {
		ago[i] = time.Duration(now-at) * time.Microsecond
	}
	m.Seed(key, p, ago)
}

// sent records that a request of this process left on budget b now, and
// returns when, µs of the local clock.
func (s *Store) sent(b *redisBudget, p store.Policy) int64 {
	now := s.localMicros()
	b.sends.add(now, micros(p.Timespan), p.Limit)
	return now
}

// sentLate records that the request of rec left at µs leftAt of the local
// clock (0: now): its logged send moves there, or it is logged now when it
// was not.
func (s *Store) sentLate(b *redisBudget, p store.Policy, rec record, leftAt int64) {
	if rec.logged == 0 {
		s.sent(b, p)
		return
	}
	if leftAt == 0 {
		leftAt = s.localMicros()
	}
	b.sends.move(rec.logged, leftAt)
}

// seedFallback starts the local budget that decides during an outage from
// this process's own sends in the last timespan, once per outage, so that
// falling back admits no more than the process's share allows in any
// window, counting what it sent just before.
func (s *Store) seedFallback(key string, b *redisBudget, p store.Policy) {
	outage := s.outages.Load()
	if b.seeded.Swap(outage) == outage {
		return
	}
	now := s.localMicros()
	sends := b.sends.since(now - micros(p.Timespan))
	seedSends(s.fallback, key, p, now, sends)
}

// skewNow measures the µs from localMicros to the server's time as the
// scripts see it, from above: the server reads its time after the local
// one is read here, so a local instant moved by it onto the server's
// clock lands no earlier than it was. Placed earlier, by as much as a
// slow reply took, a send would leave the window that much too soon, and
// the window admit a send more in the timespan it ends. The skew the
// replies measure (s.skew) is no bound, and none is known before a first
// reply: a process may start in an outage.
func (s *Store) skewNow(ctx context.Context) (int64, error) {
	asked := s.localMicros()
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMicro() + s.offset.Load() - asked, nil
}

// learnOutageSends tells Redis of the sends this process made on each
// budget since the outage started at µs from (and those of the last
// timespan before it, when Redis lost the budget), before the shared
// budgets decide again: the window then counts them, and the process
// stays exact across the return.
func (s *Store) learnOutageSends(from int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	skew, err := s.skewNow(ctx)
	if err != nil {
		return err
	}
	var keys [][]string
	var args [][]any
	s.budgets.Range(func(_, v any) bool {
		b := v.(*redisBudget)
		p := b.currentPolicy()
		sends := b.sends.since(s.localMicros() - micros(p.Timespan))
		before := 0
		for before < len(sends) && sends[before] < from {
			before++
		}
		if before == len(sends) || p.Strategy == store.StrategyLinear {
			return true // nothing sent in the outage
		}
		a := append(s.args(b, p, false, 1+len(sends)), before)
		for _, at := range sends {
			a = append(a, strconv.FormatInt(at+skew, 10))
		}
		keys, args = append(keys, b.keys), append(args, a)
		return true
	})
	if len(keys) == 0 {
		return nil
	}
	_, err = s.pipelined(ctx, scriptLearn, len(keys), func(i int) ([]string, []any) { return keys[i], args[i] })
	return err
}

// confirmMigrated is Confirm of a reservation that the local budget made
// during an outage, once Redis answers again: from then on the shared
// budget decides. The first time, the local reservation is released and
// its request takes a slot in Redis, as a reservation Redis lost does,
// under a new ID that the local one maps to; later, that reservation is
// confirmed. Should Redis fail again meanwhile, the local reservation,
// kept until Redis answered, goes on.
func (s *Store) confirmMigrated(ctx context.Context, key string, b *redisBudget, id uint64) (time.Duration, error) {
	b.mu.Lock()
	rid, moved := b.migrated[id]
	p := b.policy
	b.mu.Unlock()
	if moved {
		left, err := s.confirm(ctx, b, rid, 0)
		if err == nil && left == 0 {
			b.mu.Lock()
			delete(b.migrated, id)
			b.mu.Unlock()
		}
		return left, err
	}
	rid = s.seq.Add(1)
	rep, err := s.reserve(ctx, b, p, store.Request{MaxWait: store.NoMaxWait}, rid, nil, store.NoMaxWait, nil)
	if err != nil {
		// Down again: the local budget goes on deciding it.
		return failed(s, ctx, err, func() (time.Duration, error) { return s.fallback.Confirm(ctx, key, id&^fallbackID) })
	}
	_ = s.fallback.Release(ctx, key, id&^fallbackID)
	if rep.wait == 0 {
		s.sent(b, p)
		return 0, nil
	}
	b.mu.Lock()
	b.migrated[id] = rid
	b.outstanding[rid] = rep.record()
	b.mu.Unlock()
	return rep.wait, nil
}
