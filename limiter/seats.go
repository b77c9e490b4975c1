package limiter

import (
	"container/list"
	"runtime"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// Concurrency limits the requests of a budget in flight at once (its
// seats), beside its rate. The zero value sets no limit.
//
// API Priority and Fairness meters seats, not rate: a priority level of
// three seats rejects the fourth request in flight, however slowly they
// come. A counted request holds a seat from its send until its response
// is finished (body read to EOF or closed, or the round trip failed); a
// watch until its response headers arrive, or, when it asks for its
// initial events (client-go's watch-list), until they end. Exempt
// requests, pods/log and the proxy subresources (which the API server
// runs outside APF's seats) take none.
type Concurrency struct {
	// Fixed, when positive, is a fixed number of seats; Adaptive and Max
	// are then ignored.
	Fixed int
	// Adaptive learns the number of seats from the server's answers: it
	// starts at InitialConcurrency, grows while answers are good, and is
	// cut on a throttling answer (429, or 503 with Retry-After), once per
	// burst of them.
	Adaptive bool
	// Max is the ceiling of the adaptive limit: 0 is DefaultMaxConcurrency.
	Max int
}

const (
	// DefaultMaxConcurrency is the default ceiling of an adaptive
	// concurrency limit.
	DefaultMaxConcurrency = 100
	// InitialConcurrency is the limit an adaptive concurrency limit starts
	// from.
	InitialConcurrency = 2
)

// enabled reports whether c limits anything.
func (c Concurrency) enabled() bool { return c.Fixed > 0 || c.Adaptive }

// SeatStatus is a budget's concurrency limit and its use.
type SeatStatus struct {
	// Limit is the number of seats now: fixed, or as learned so far; with
	// a store shared by several processes, theirs together.
	Limit int
	// Share is the seats this process may hold: Limit, or its share of it.
	Share int
	// InUse is the number of seats held: requests sent whose responses are
	// not finished, and requests waiting for their slot with a seat.
	InUse int
	// Waiting is the number of requests waiting for a seat.
	Waiting int
	// ByClass is the use of the seats by each traffic class: requests in
	// flight (sent, their responses not finished) and waiting for a seat.
	ByClass [NumClasses]ClassSeats
}

// ClassSeats is one traffic class's use of a budget's seats.
type ClassSeats struct {
	InFlight, Waiting int
}

// seats is a budget's concurrency limit: a semaphore whose size the
// control sets, served first come, first served within a traffic class,
// and among the classes that wait by their weights (fair; nil: one line
// for all). mu guards everything; it is held for bookkeeping only, never
// while waiting.
type seats struct {
	mu       sync.Mutex
	inUse    int                   // seats held
	sentSeqs []uint64              // the sequence numbers of those held by requests sent, in the order sent
	waiting  [NumClasses]list.List // *seatWaiter, in arrival order, by class (all in 0 without fair)
	inFlight [NumClasses]int       // requests sent and not finished, by class
	fair     *fairShare            // shares the seats among the classes that wait; nil: one line
	ctl      control
	hold     time.Duration // moving average of how long a seat is held

	// With a store shared by several processes, the control's limit is
	// theirs together and this process holds its share of it.
	key    string
	shared store.SeatSharer // nil: the limit is this process's alone
	// slotFirst is set when requests that find no seat reserve their slot
	// first (see admitShared): the store then counts the processes sharing
	// the limit before any of them takes a seat.
	slotFirst bool

	clock clock.Clock // the limiter's
	// rechecking is set while a timer is to grant the waiters seats once
	// this process's share of a shared limit, 0, has grown (see
	// recheckLocked).
	rechecking bool
}

// seatWaiter is a request waiting for a seat. ready is closed when the
// seat is given to it (granted is then set, under seats.mu).
type seatWaiter struct {
	ready   chan struct{}
	class   Class
	granted bool
	seat    seat
}

// seat is a seat held by one request. The zero seat holds nothing.
type seat struct {
	s      *seats
	class  Class     // its request's
	seq    uint64    // the order of taking, to cut once per burst of throttles
	peers  int       // requests in flight when it was sent, itself included; 0: not sent
	own    int       // this process's among them
	others int       // other processes' requests in flight then, at their shares
	since  time.Time // when it was taken
}

func newSeats(c Concurrency, key string, st store.Store, clk clock.Clock) *seats {
	if !c.enabled() {
		return nil
	}
	s := &seats{ctl: newControl(c, clk.Now()), key: key, clock: clk}
	s.shared, _ = st.(store.SeatSharer)
	return s
}

// capLocked returns the seats this process may hold: the limit, or its
// share of it. s.mu must be held.
func (s *seats) capLocked() int {
	share, _ := s.shareLocked()
	return share
}

// shareLocked returns the seats this process may hold, and the number of
// processes that share the limit (1 when it is this process's alone).
// Until the store has counted the processes sharing it, others may hold
// the whole limit: this process holds none when its first requests
// reserve their slots first, which counts them, and one otherwise, the
// request whose slot will. s.mu must be held.
func (s *seats) shareLocked() (share, processes int) {
	n := s.ctl.seats()
	if s.shared == nil {
		return n, 1
	}
	share, processes = s.shared.SeatShare(s.key, n)
	if processes == 0 {
		share, processes = 1, 1
		if s.slotFirst {
			share = 0
		}
	}
	return share, processes
}

// adopt applies another process's cut of the shared limit.
func (s *seats) adopt(cut store.SeatCut, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, processes := s.shareLocked()
	s.ctl.adopt(cut, processes, now)
}

// tryTake takes a seat for a request of class c if one is free and
// nobody is waiting before.
func (s *seats) tryTake(now time.Time, c Class) (seat, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queuedLocked() > 0 || s.inUse >= s.capLocked() {
		return seat{}, false
	}
	return s.takeLocked(now, c), true
}

// queuedLocked returns the number of requests waiting for a seat. s.mu
// must be held.
func (s *seats) queuedLocked() int {
	n := 0
	for i := range s.waiting {
		n += s.waiting[i].Len()
	}
	return n
}

// line returns the queue of the waiters of class c.
func (s *seats) line(c Class) *list.List {
	if s.fair == nil {
		return &s.waiting[0]
	}
	return &s.waiting[c]
}

// nextLocked returns the queue whose first waiter is given the next
// seat, nil when nobody waits. s.mu must be held.
func (s *seats) nextLocked() *list.List {
	if s.fair == nil {
		if s.waiting[0].Len() == 0 {
			return nil
		}
		return &s.waiting[0]
	}
	c, ok := s.fair.pick(waitingIn(&s.waiting))
	if !ok {
		return nil
	}
	s.fair.charge(c)
	return &s.waiting[c]
}

// takeLocked takes a seat. Its sequence number is taken now, not when
// its request is sent: a request admitted before a cut belongs to the
// burst that drew it, however long its slot then took (with a shared
// store, a round trip), and its throttle must not cut again. s.mu must be
// held.
func (s *seats) takeLocked(now time.Time, c Class) seat {
	s.inUse++
	return seat{s: s, class: c, seq: s.ctl.seated(), since: now}
}

// send marks the seat's request as sent: its slot has come. Its peers are
// the requests in flight; requests that hold a seat while they wait for
// their slot are not seen by the server, and do not count. With other
// processes sharing the limit, their requests in flight are estimated as
// their shares (the limit less this process's). Until the processes agree
// on one limit (a cut made or adopted), each may hold as many as it
// believes the limit to be: its peers, which bound the growth, then count
// the others as the larger of their shares and as many as this process
// has in flight each.
func (st *seat) send() {
	s := st.s
	if s == nil || st.peers != 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.sendLocked()
}

// trySend is send when fewer requests are in flight than this process
// may hold, and reports whether it sent: false only when a cut since the
// seat was taken left more seats held than the limit (see roomToSend).
// The zero seat always sends.
func (st *seat) trySend() bool {
	s := st.s
	if s == nil || st.peers != 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sentSeqs) >= s.capLocked() {
		return false
	}
	st.sendLocked()
	return true
}

// unsend undoes send: the request is not leaving yet after all.
func (st *seat) unsend() {
	s := st.s
	if s == nil || st.peers == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsendLocked(st.seq)
	s.inFlight[st.class]--
	st.peers, st.own, st.others = 0, 0, 0
}

// requeue gives back the seat st, unsent, and queues a waiter for the
// next free seat first in line, for a seat holder that may not send yet
// (see roomToSend).
func (s *seats) requeue(st seat, now time.Time) (*seatWaiter, *list.Element) {
	w := &seatWaiter{ready: make(chan struct{}), class: st.class}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inUse--
	e := s.line(st.class).PushFront(w)
	s.grantLocked(now)
	return w, e
}

// sendLocked is send under s.mu.
func (st *seat) sendLocked() {
	s := st.s
	s.sentSeqs = append(s.sentSeqs, st.seq)
	s.inFlight[st.class]++
	inFlight := len(s.sentSeqs)
	share, n := s.shareLocked()
	st.others = max(s.ctl.seats()-share, 0)
	others := st.others
	if !s.ctl.agreed && n > 1 {
		others = max(others, inFlight*(n-1))
	}
	st.peers, st.own = inFlight+others, inFlight
}

// unsendLocked forgets the send of the request with sequence number seq,
// finished, and returns how many requests sent before it are still in
// flight. s.mu must be held.
func (s *seats) unsendLocked(seq uint64) (older int) {
	for i, x := range s.sentSeqs {
		if x == seq {
			s.sentSeqs = append(s.sentSeqs[:i], s.sentSeqs[i+1:]...)
			return older
		}
		if x < seq {
			older++
		}
	}
	return older
}

// enqueue queues a waiter of class c for the next free seat. The seats
// held may all have been given back since the caller found none free, and
// nobody else would then grant this waiter one: it is granted at once when
// a seat is free.
func (s *seats) enqueue(now time.Time, c Class) (*seatWaiter, *list.Element) {
	w := &seatWaiter{ready: make(chan struct{}), class: c}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.line(c).PushBack(w)
	s.grantLocked(now)
	return w, e
}

// leave takes w out of the queue. When the seat was given to w meanwhile,
// it returns it and reports true.
func (s *seats) leave(w *seatWaiter, e *list.Element, now time.Time) (seat, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted {
		return w.seat, true
	}
	s.line(w.class).Remove(e)
	// The waiter may have been the head holding back a free seat.
	s.grantLocked(now)
	return seat{}, false
}

// grantLocked gives free seats to the waiters at the head of the queue,
// and reports whether it gave any. s.mu must be held.
func (s *seats) grantLocked(now time.Time) (granted bool) {
	share := s.capLocked()
	for s.inUse < share {
		q := s.nextLocked()
		if q == nil {
			return granted
		}
		e := q.Front()
		q.Remove(e)
		w := e.Value.(*seatWaiter)
		w.seat, w.granted = s.takeLocked(now, w.class), true
		close(w.ready)
		granted = true
	}
	if share == 0 && s.queuedLocked() > 0 {
		s.recheckLocked()
	}
	return granted
}

// shareRecheck is how often waiters look again for seats while this
// process's share of a shared limit is 0.
const shareRecheck = 10 * time.Millisecond

// recheckLocked grants the waiters seats once this process's share of a
// shared limit has grown from 0: until the store has counted the
// processes sharing the budget, and while this process joins others (see
// store.SeatSharer). No seat of this process's is held meanwhile, so no
// free would grant them. s.mu must be held.
func (s *seats) recheckLocked() {
	if s.rechecking {
		return
	}
	s.rechecking = true
	t := s.clock.NewTimer(shareRecheck)
	go func() {
		<-t.C()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rechecking = false
		s.grantLocked(s.clock.Now())
	}()
}

// outcome is how a request that held a seat ended.
type outcome int8

const (
	// outcomeUnsent: it was never sent (refused or cancelled while waiting
	// for its slot).
	outcomeUnsent outcome = iota
	// outcomeGood: the server answered without throttling.
	outcomeGood
	// outcomeThrottled: the server answered 429, or 503 with Retry-After.
	outcomeThrottled
	// outcomeFailed: the round trip failed; the server's state is unknown.
	outcomeFailed
)

// free gives back the seat, telling the control how the request ended.
// The zero seat does nothing (and reads no clock).
func (st seat) free(o outcome) {
	s := st.s
	if s == nil {
		return
	}
	cut, ok, granted := s.freeSeat(st, o, s.clock.Now())
	if ok && s.shared != nil {
		s.shared.ShareCut(s.key, cut)
	}
	if granted {
		// The waiter given the seat runs next on this P, but only once
		// this goroutine blocks: that of a finished response goes on to
		// decode it first, and the seat would stand idle meanwhile.
		runtime.Gosched()
	}
}

// freeSeat is free under the lock; it returns the cut (or rise of the
// ceiling) the control made, and whether the seat went to a waiter.
func (s *seats) freeSeat(st seat, o outcome, now time.Time) (cut store.SeatCut, cutOK, granted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inUse--
	var older int
	if st.peers != 0 {
		older = s.unsendLocked(st.seq)
		s.inFlight[st.class]--
	}
	if o != outcomeUnsent {
		held := now.Sub(st.since)
		s.hold += (held - s.hold) / 8
	}
	switch o {
	case outcomeGood:
		cut, cutOK = s.ctl.good(st.seq, st.peers, st.own, now)
	case outcomeThrottled:
		// The requests sent before it and still unanswered are those the
		// server was running when it refused it: a refusal comes back at
		// once, a served request takes its time. Other processes sharing
		// the limit are taken to have had their shares running.
		_, processes := s.shareLocked()
		peers, running := st.peers, older+st.others
		if !s.ctl.agreed && processes > 1 {
			// Before they agree on a limit, each has grown its own, and
			// their shares of this one's tell nothing: the cut rests on
			// this process's requests alone. It lies below the server's
			// seats, which quick probes find a second after the cooldown
			// (see control); a cut above them would cost every process
			// another Retry-After.
			peers, running = st.own, older
		}
		cut, cutOK = s.ctl.throttled(st.seq, peers, running, processes, now)
	}
	return cut, cutOK, s.grantLocked(now)
}

// status returns the limit and its use.
func (s *seats) status() SeatStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SeatStatus{Limit: s.ctl.seats(), Share: s.capLocked(), InUse: s.inUse, Waiting: s.queuedLocked()}
	for c := range Class(NumClasses) {
		st.ByClass[c].InFlight = s.inFlight[c]
	}
	for i := range s.waiting {
		for e := s.waiting[i].Front(); e != nil; e = e.Next() {
			st.ByClass[e.Value.(*seatWaiter).class].Waiting++
		}
	}
	return st
}

// estimate returns how long a newcomer would wait for a seat, from the
// queue ahead of it and how long seats have been held of late, after this
// process's wait for a share of a limit it has started sharing.
func (s *seats) estimate() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	rounds := s.queuedLocked()/max(s.capLocked(), 1) + 1
	d := time.Duration(rounds) * max(s.hold, time.Millisecond)
	if s.shared != nil {
		d += s.shared.ShareWait(s.key)
	}
	return d
}
