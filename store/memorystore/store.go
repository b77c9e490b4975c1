package memorystore

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// sweepEvery is how often, in store time, a Reserve looks for idle budgets
// to drop.
const sweepEvery = time.Second

// Store is the in-memory store.Store: budgets shared by the clients of one
// process. It is the default store.
//
// Its time comes from the clock it was made with, read once per call.
// Budgets are created on first use and dropped once idle: when their last
// reservation is one timespan old and no cooldown or waiter remains, so
// memory returns to its baseline without a background goroutine (Reserve
// sweeps at most once a second of store time).
//
// A Store is safe for concurrent use. The zero value is not usable; call
// New.
type Store struct {
	clock     clock.PassiveClock
	epoch     time.Time
	budgets   sync.Map               // string -> *budget
	last      atomic.Pointer[budget] // the budget used last: most processes use one
	count     atomic.Int64
	lastSweep atomic.Int64
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Sender = (*Store)(nil)
)

// New returns an empty in-memory store that reads time from c (the
// real clock when c is nil).
func New(c clock.PassiveClock) *Store {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Store{clock: c, epoch: c.Now()}
}

// budget is one budget's state. mu guards everything below it; it is held
// for arithmetic only.
type budget struct {
	key     string // its key in the map, never changed
	mu      sync.Mutex
	dropped bool             // removed from the map by a sweep: look it up again
	policy  store.Policy     // the policy last applied
	sched   schedule         // a *window or a *linear, as policy.Strategy says; nil before the first policy
	cd      int64            // end of the cooldown
	lastID  uint64           // IDs are unique per budget
	pending map[uint64]int64 // deferred reservations: ID -> slot
}

// now returns the store time in nanoseconds since the store was made, on
// the clock's monotonic reading.
func (m *Store) now() int64 { return int64(m.clock.Since(m.epoch)) }

// Len returns the number of budgets the store holds.
func (m *Store) Len() int { return int(m.count.Load()) }

// Reserve implements store.Store.
func (m *Store) Reserve(_ context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	b := m.lockedBudget(key)
	// Read the time under the lock: decisions on one budget are made in
	// time order, never from a time read before another's.
	now := m.now()
	res := b.reserveLocked(now, p, r)
	b.mu.Unlock()
	m.maybeSweep(now)
	return res, nil
}

// lockedBudget returns the budget of key, creating it, with its lock held.
func (m *Store) lockedBudget(key string) *budget {
	for {
		b := m.budget(key)
		b.mu.Lock()
		if !b.dropped {
			return b
		}
		b.mu.Unlock() // dropped by a sweep meanwhile: look it up again
		m.last.CompareAndSwap(b, nil)
	}
}

// reserveLocked applies policy p and reserves a slot. b.mu must be held.
func (b *budget) reserveLocked(now int64, p store.Policy, r store.Request) store.Reservation {
	b.setPolicyLocked(p)
	id := b.lastID + 1
	slot, ok := b.sched.reserve(now, b.cd, id, r)
	res := store.Reservation{OK: ok, Wait: time.Duration(slot - now), Cooldown: b.cd > now}
	if !ok || (slot == now && !b.deferrable(r)) {
		return res
	}
	b.lastID = id
	if b.pending == nil {
		b.pending = make(map[uint64]int64)
	}
	b.pending[id] = slot
	res.ID = id
	return res
}

// deferrable reports whether r, admitted at once, is kept as a
// reservation to confirm: when it asks to be and the window moves late
// sends.
func (b *budget) deferrable(r store.Request) bool {
	return r.Deferred && b.policy.Strategy != store.StrategyLinear
}

// setPolicyLocked makes the budget follow p, starting afresh when the
// strategy changes. b.mu must be held.
func (b *budget) setPolicyLocked(p store.Policy) {
	if b.sched != nil && p == b.policy {
		return
	}
	if b.sched == nil || b.policy.Strategy != p.Strategy {
		// A budget that changes strategy starts afresh; its waiters keep
		// their slots.
		b.sched = &window{}
		if p.Strategy == store.StrategyLinear {
			b.sched = &linear{}
		}
	}
	b.policy = p
	b.sched.setPolicy(p)
}

// Confirm implements store.Store.
func (m *Store) Confirm(_ context.Context, key string, id uint64) (time.Duration, error) {
	b, ok := m.existing(key)
	if !ok {
		return 0, store.ErrUnknownReservation
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := m.now()
	slot, ok := b.pending[id]
	if !ok {
		return 0, store.ErrUnknownReservation
	}
	if slot > now {
		return time.Duration(slot - now), nil
	}
	if at := b.leaveLocked(id, slot, now); at > now {
		b.pending[id] = at
		return time.Duration(at - now), nil
	}
	return 0, nil
}

// leaveLocked records that the request of reservation id, reserved at
// slot, leaves at now, no earlier than slot, and returns when the window
// lets it: now, unless it came late and requests sent out of order, or a
// cooldown, leave no room until later (see window.sendLate). b.mu must be
// held.
func (b *budget) leaveLocked(id uint64, slot, now int64) int64 {
	delete(b.pending, id)
	if slot == now && b.cd <= now {
		b.sched.sent(id, slot)
		return now
	}
	// Late, or on time but held back by a cooldown set at its very slot
	// (which moved only the slots still ahead).
	return b.sched.sendLate(id, slot, now, b.cd, func(id uint64, at int64) { b.pending[id] = at })
}

// Sent implements store.Sender: the request of the reservation id,
// admitted at once and kept to be confirmed (store.Request.Deferred),
// left now, after its slot. It counts where it left, or where the window
// first has room for it when requests sent out of order leave none there:
// later than it left, which only delays the others.
func (m *Store) Sent(key string, id uint64) {
	b, ok := m.existing(key)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if slot, ok := b.pending[id]; ok {
		b.leaveLocked(id, slot, max(m.now(), slot))
	}
}

// Release implements store.Store.
func (m *Store) Release(_ context.Context, key string, id uint64) error {
	b, ok := m.existing(key)
	if !ok {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	slot, ok := b.pending[id]
	if !ok {
		return nil
	}
	delete(b.pending, id)
	b.sched.release(id, slot)
	return nil
}

// SetCooldown implements store.Store.
func (m *Store) SetCooldown(_ context.Context, key string, p store.Policy, d time.Duration) (time.Duration, error) {
	b := m.lockedBudget(key)
	defer b.mu.Unlock()
	now := m.now()
	b.setPolicyLocked(p)
	b.cooldownLocked(now, now+int64(max(d, 0)))
	return time.Duration(max(b.cd-now, 0)), nil
}

// cooldownLocked extends the cooldown to until and moves the outstanding
// reservations after it. b.mu must be held.
func (b *budget) cooldownLocked(now, until int64) {
	if until <= b.cd {
		return
	}
	b.cd = until
	delta := b.sched.shift(now, until, maps.Values(b.pending))
	if delta == 0 {
		return
	}
	for id, at := range b.pending {
		if at > now {
			b.pending[id] = at + delta
		}
	}
}

// Cooldown implements store.Store.
func (m *Store) Cooldown(_ context.Context, key string) (time.Duration, error) {
	b, ok := m.existing(key)
	if !ok {
		return 0, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := m.now()
	return time.Duration(max(b.cd-now, 0)), nil
}

// budget returns the budget of key, creating it.
func (m *Store) budget(key string) *budget {
	if b := m.last.Load(); b != nil && b.key == key {
		return b // a comparison of keys costs less than a lookup's hash
	}
	v, ok := m.budgets.Load(key)
	if !ok {
		var loaded bool
		if v, loaded = m.budgets.LoadOrStore(key, &budget{key: key}); !loaded {
			m.count.Add(1)
		}
	}
	b := v.(*budget)
	m.last.Store(b)
	return b
}

func (m *Store) existing(key string) (*budget, bool) {
	v, ok := m.budgets.Load(key)
	if !ok {
		return nil, false
	}
	return v.(*budget), true
}

// maybeSweep drops idle budgets, at most once per sweepEvery of store time.
func (m *Store) maybeSweep(now int64) {
	last := m.lastSweep.Load()
	if now-last < int64(sweepEvery) || !m.lastSweep.CompareAndSwap(last, now) {
		return
	}
	m.budgets.Range(func(k, v any) bool {
		b := v.(*budget)
		b.mu.Lock()
		if b.idleLocked(now) {
			b.dropped = true
			m.budgets.Delete(k)
			m.count.Add(-1)
		}
		b.mu.Unlock()
		return true
	})
}

// idleLocked reports whether the budget constrains nothing from now on, so
// that dropping it changes no decision. b.mu must be held.
func (b *budget) idleLocked(now int64) bool {
	if len(b.pending) > 0 || b.cd > now {
		return false
	}
	return b.sched == nil || b.sched.idleAt() <= now
}

// Seed records sends already made on the budget key under policy p, each
// ago before now, as if this store had admitted them: a budget that takes
// over from elsewhere (the Redis store's local budget in an outage) starts
// from what was sent just before. Sends older than a timespan change
// nothing.
func (m *Store) Seed(key string, p store.Policy, ago []time.Duration) {
	if len(ago) == 0 {
		return
	}
	b := m.lockedBudget(key)
	defer b.mu.Unlock()
	here := m.now()
	b.setPolicyLocked(p)
	for _, d := range ago {
		b.sched.seed(here-int64(d), here)
	}
}
