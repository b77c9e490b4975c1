package redisstore

import (
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// Leases. A request that waits for a seat reserves its slot first, kept to
// be confirmed by Sent (store.Request.Deferred): one round trip per
// request, on the cores the API server may need. While a window budget is
// far from its limit, the reservation that makes that round trip takes a
// few more at the same instant (a lease, see lua/reserve_window.lua), and
// the process's next such requests take those without one. A leased
// reservation is exactly what its own round trip would have given, a
// moment earlier: it counts from the instant it was reserved, earlier than
// its request leaves, which only ever delays others, until Sent records
// where the request left.
//
// A lease is used only within leaseFor of being taken, so that every send
// is still recorded long before its slot is a timespan old, and not after
// a cooldown that this process set or heard of (dropLease): those left are
// dropped from Redis then, in the background, with the sends being
// recorded (see sent.go), since no request used them. It asks for as many as the last
// one gave while they were all used in time, twice that up to leaseMax,
// and half as many when some were left; and for none when the request
// before came longer than leaseFor ago, where a lease would go unused.
// leaseForMost lets a process that a few seats serve (a few hundred
// requests a second) use all of a lease of leaseMax.
const (
	leaseMax     = 16
	leaseFirst   = 2
	leaseForMost = 100 * time.Millisecond
)

// lease is what is left of a budget's last lease. Guarded by the budget's
// mu.
type lease struct {
	next, end uint64 // the orders (see member) of the reservations left: next … end-1
	at, mark  int64  // as their record's
	got       int64  // localMicros of the lease
	seen      int64  // localMicros of the last request that could lease
	want      int    // how many the next lease asks for; 0: leaseFirst
	epoch     uint64 // counts the drops, so that a lease taken across one is dropped too
}

// leaseAsk is what a reservation asks to lease with it.
type leaseAsk struct {
	n     int    // how many (0: none)
	first uint64 // the order the first is named after
	epoch uint64 // the lease's epoch when asked
}

// leaseFor returns how long after being taken a lease of a budget under p
// may be used: leaseForMost, or a sixteenth of the timespan when less.
func (s *Store) leaseFor(p store.Policy) time.Duration { return min(p.Timespan/16, s.leaseMost) }

// leases reports whether a request r on a budget under p may take a leased
// reservation, or ask for a lease.
func (s *Store) leases(p store.Policy, r store.Request) bool {
	return r.Deferred && p.Strategy != store.StrategyLinear
}

// takeLeasedLocked gives request r a reservation of the budget's lease, if
// one is left and still fresh, as the reserve script would have answered
// it. Any request drops a lease past its time. b.mu must be held, with no
// request held in-process.
func (s *Store) takeLeasedLocked(b *redisBudget, p store.Policy, r store.Request) (store.Reservation, bool) {
	l := &b.lease
	if l.next == l.end {
		return store.Reservation{}, false
	}
	if s.leaseOverLocked(b, p) {
		s.expireLeaseLocked(b)
		return store.Reservation{}, false
	}
	if !s.leases(p, r) {
		return store.Reservation{}, false
	}
	id := l.next
	l.next++
	l.seen = s.localMicros()
	rec := record{member: "=" + s.member(id), at: l.at, mark: l.mark}
	rec.logged = s.sent(b, p)
	b.outstanding[id] = rec
	return store.Reservation{OK: true, ID: id}, true
}

// leaseAskLocked returns what a reservation of request r asks to lease
// with it. b.mu must be held.
func (s *Store) leaseAskLocked(b *redisBudget, p store.Policy, r store.Request) leaseAsk {
	if !s.leases(p, r) {
		return leaseAsk{}
	}
	now, seen := s.localMicros(), b.lease.seen
	b.lease.seen = now
	if seen == 0 || now-seen >= micros(s.leaseFor(p)) {
		return leaseAsk{}
	}
	n := b.lease.want
	if n == 0 {
		n = leaseFirst
	}
	return leaseAsk{n: n, first: s.seq.Add(uint64(n)) - uint64(n) + 1, epoch: b.lease.epoch}
}

// keepLeaseLocked keeps the reservations the reply rep leased, as asked
// by ask. A lease taken across a drop is dropped at once. b.mu must be
// held.
func (s *Store) keepLeaseLocked(b *redisBudget, ask leaseAsk, rep reply) {
	if rep.leased == 0 {
		return
	}
	l := &b.lease
	if l.epoch != ask.epoch {
		s.dropLeased(b, ask.first, ask.first+uint64(rep.leased))
		return
	}
	s.dropLeaseLocked(b) // another request's lease, taken meanwhile
	if int(rep.leased) == ask.n {
		l.want = min(2*ask.n, leaseMax)
	} else {
		l.want = max(int(rep.leased), 1)
	}
	l.next, l.end = ask.first, ask.first+uint64(rep.leased)
	l.at, l.mark, l.got = rep.now, rep.mark, s.localMicros()
	// Dropped when its time is up, should no request come to drop it:
	// its slots would count until they were a timespan old.
	epoch := l.epoch
	time.AfterFunc(s.leaseFor(b.policy), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if l.epoch == epoch && l.next < l.end && s.leaseOverLocked(b, b.policy) {
			s.expireLeaseLocked(b)
		}
	})
}

// leaseOverLocked reports whether the time of the budget's lease under p
// is up. b.mu must be held.
func (s *Store) leaseOverLocked(b *redisBudget, p store.Policy) bool {
	return s.localMicros()-b.lease.got >= micros(s.leaseFor(p))
}

// expireLeaseLocked drops what is left of the budget's lease when its
// time is up, and asks for fewer next time. b.mu must be held.
func (s *Store) expireLeaseLocked(b *redisBudget) {
	b.lease.want = max(b.lease.want/2, 1)
	s.dropLeaseLocked(b)
}

// dropLease drops what is left of the budget key's lease, after a
// cooldown: its reservations sit at an instant before it, and a request
// that took one would leave during it.
func (s *Store) dropLease(b *redisBudget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.dropLeaseLocked(b)
}

// dropLeaseLocked drops what is left of the budget's lease. b.mu must be
// held.
func (s *Store) dropLeaseLocked(b *redisBudget) {
	l := &b.lease
	l.epoch++
	s.dropLeased(b, l.next, l.end)
	l.next, l.end = 0, 0
}

// dropLeased drops the leased reservations of orders from … to-1 from
// Redis, in the background, with the sends being recorded.
func (s *Store) dropLeased(b *redisBudget, from, to uint64) {
	for id := from; id < to; id++ {
		s.queueSent(sentSend{b: b, id: id, drop: true, rec: record{member: "=" + s.member(id)}})
	}
}

// dropLeaseOf drops the lease of the budget whose channel is channel, on
// which a cooldown was set.
func (s *Store) dropLeaseOf(channel string) {
	if b, ok := s.budgetOf(channel); ok {
		s.dropLease(b)
	}
}
