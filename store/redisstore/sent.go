package redisstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// A request that reserved its slot before waiting for a seat
// (store.Request.Deferred) tells the store when it leaves (Sent), and the
// store records the send at that instant in the background: its Confirm
// runs as if made when the request left (the script's clock set to then,
// see offsetAt). The window stays exact meanwhile: until the record
// lands, the send counts at its reserved instant, earlier than it left,
// which only ever delays others; and it lands long before that instant is
// a timespan old.

// sentSend is a send to record: the reservation and when its request left.
type sentSend struct {
	b  *redisBudget
	id uint64
	at int64 // localMicros

	rec   record // its record, when batch
	batch bool   // kept as a send at its slot: recorded in a batch
	from  int64  // not 0: let go after a slow round trip, and recorded no earlier than this, µs of the server's clock (see lag.go)
}

// sentQueue holds the sends to record, for one goroutine to run.
type sentQueue struct {
	mu    sync.Mutex
	sends []sentSend
	kick  chan struct{} // holds a token while sends wait

	flushing sync.Mutex // one flush at a time
}

// Sent implements store.Sender.
func (s *Store) Sent(key string, id uint64) {
	if id == 0 {
		return
	}
	b, ok := s.existing(key)
	if !ok || id&fallbackID != 0 || s.down.Load() {
		// Decided in-process: confirming costs no round trip.
		_, _ = s.Confirm(context.Background(), key, id)
		return
	}
	s.queueSent(sentSend{b: b, id: id, at: s.localMicros()})
}

// queueSent queues a send to record and wakes the goroutine that does.
func (s *Store) queueSent(x sentSend) {
	q := &s.sentQ
	q.mu.Lock()
	q.sends = append(q.sends, x)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// recordSends records the queued sends until the store is closed. It
// gathers those that follow the first for a moment (sentGather), so that
// one script records several: requests that leave as seats free come one
// at a time.
func (s *Store) recordSends() {
	defer s.wg.Done()
	for {
		select {
		case <-s.sentQ.kick:
		case <-s.done:
			return
		}
		if d := s.sentGather(); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-s.done: // Close records them
				t.Stop()
				return
			}
		}
		s.flushSent()
	}
}

// sentGather returns how long the queued sends may wait for others to
// be recorded with: sentGatherMax, or less, a twentieth of the shortest
// timespan among their budgets. Meanwhile each counts at its slot, a
// little earlier than it left; what bounds the wait is that it must land
// long before that slot is a timespan old. A slot is reserved when its
// request starts to wait for a seat, and a wait of a quarter of a
// timespan or more confirms with Redis first: gathered, a send lands
// within about a third of a timespan of its slot.
func (s *Store) sentGather() time.Duration {
	q := &s.sentQ
	q.mu.Lock()
	budgets := make([]*redisBudget, 0, len(q.sends))
	for _, x := range q.sends {
		budgets = append(budgets, x.b)
	}
	q.mu.Unlock()
	d := sentGatherMax
	for _, b := range budgets {
		b.mu.Lock()
		d = min(d, b.policy.Timespan/20)
		b.mu.Unlock()
	}
	return d
}

// flushSent records every queued send: those admitted at once and kept
// as sends at their slots, and those let go after slow round trips (see
// lag.go), in one script per budget and batch; the others (held back
// since, or decided in-process) one by one.
func (s *Store) flushSent() {
	q := &s.sentQ
	q.flushing.Lock()
	defer q.flushing.Unlock()
	q.mu.Lock()
	sends := q.sends
	q.sends = nil
	q.mu.Unlock()
	ctx := context.Background()
	batches := map[*redisBudget][]sentSend{}
	lags := map[*redisBudget][]sentSend{}
	var single []sentSend
	for _, x := range sends {
		if x.from != 0 {
			lags[x.b] = append(lags[x.b], x)
			continue
		}
		x.rec, x.batch = x.b.atOnce(x.id)
		if x.batch {
			batches[x.b] = append(batches[x.b], x)
		} else {
			single = append(single, x)
		}
	}
	// Concurrently, so that recording keeps up with the requests however
	// long a round trip takes.
	var wg sync.WaitGroup
	sem := make(chan struct{}, sentConcurrency)
	run := func(f func()) {
		sem <- struct{}{}
		wg.Go(func() {
			f()
			<-sem
		})
	}
	inBatches := func(by map[*redisBudget][]sentSend, record func(context.Context, []sentSend)) {
		for _, xs := range by {
			for batch := range slices.Chunk(xs, sentBatch) {
				run(func() { record(ctx, batch) })
			}
		}
	}
	inBatches(batches, s.recordBatch)
	inBatches(lags, s.recordLags)
	for _, x := range single {
		run(func() { s.recordSent(ctx, x) })
	}
	wg.Wait()
}

const (
	// sentConcurrency bounds the scripts recording sends at once.
	sentConcurrency = 16
	// sentBatch bounds the sends one script records, and so its time.
	sentBatch = 64
	// sentGatherMax bounds how long queued sends wait for others, to be
	// recorded in one script (see sentGather): at the 300 to 1,500
	// requests a second a few seats serve, a few dozen at a time.
	sentGatherMax = 50 * time.Millisecond
)

// atOnce returns the record of reservation id when it is kept as a send
// at its slot (see confirmAtOnce).
func (b *redisBudget) atOnce(id uint64) (record, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec, ok := b.outstanding[id]
	return rec, ok && rec.keptAsSend()
}

// recordBatch records sends of one budget kept as sends at their slots,
// each at the instant its request left, in one script. Those it cannot
// move there are recorded one by one.
func (s *Store) recordBatch(ctx context.Context, xs []sentSend) {
	b := xs[0].b
	p := b.currentPolicy()
	offset := s.offset.Load()
	args := s.argsAt(p, hereNot, offset, 1+2*len(xs))
	args = append(args, "0")
	for _, x := range xs {
		args = append(args, x.rec.member, s.offsetAt(x.at)-offset)
	}
	v, err := s.call(ctx, scriptSent, b, args)
	codes, err := sentCodes(v, err, len(xs))
	if err != nil {
		for _, x := range xs {
			_, _ = s.failedConfirm(ctx, b, x.id, 0, err)
		}
		return
	}
	for i, x := range xs {
		if done, _ := s.sentAtOnce(b, x.id, x.rec, p, x.at, sentCode(codes, i)); !done {
			s.recordSent(ctx, x)
		}
	}
}

// recordSent confirms the reservation of x at the instant its request
// left. Should the send not fit there after all (a cooldown, or sends out
// of order, came between its slot and its seat), its entry waits on at
// the earliest instant it fits, and is confirmed again then: it is
// counted there.
func (s *Store) recordSent(ctx context.Context, x sentSend) {
	left, err := s.confirm(ctx, x.b, x.id, x.at)
	if err != nil || left <= 0 {
		return
	}
	time.AfterFunc(left, func() {
		select {
		case <-s.done:
		default:
			s.queueSent(sentSend{b: x.b, id: x.id, at: s.localMicros()})
		}
	})
}

// confirmAtOnce is confirm of a reservation admitted at once and recorded
// as a send at its slot (store.Request.Deferred), for a request that left
// at µs leftAt of the local clock, or, with leftAt 0, by its waiter asking
// whether it may leave.
// done reports that the send is recorded, at the instant it left; else
// the entry is a waiting reservation again, for confirm.lua.
func (s *Store) confirmAtOnce(ctx context.Context, b *redisBudget, id uint64, rec record, p store.Policy, leftAt int64) (done bool, err error) {
	offset := s.offset.Load()
	args := s.argsAt(p, hereNot, offset, 3)
	var asks string
	var at int64
	if leftAt != 0 {
		asks, at = "0", s.offsetAt(leftAt)-offset
	} else {
		asks = "1"
	}
	v, replied, trip, err := s.timedCall(ctx, scriptSent, b, append(args, asks, rec.member, at))
	codes, err := sentCodes(v, err, 1)
	if err != nil {
		return false, err
	}
	done, err = s.sentAtOnce(b, id, rec, p, leftAt, sentCode(codes, 0))
	if done && err == nil && leftAt == 0 {
		s.sentAfterTrip(b, p, replied, trip, b.recordedFrom(replied-trip)) // its waiter leaves now
	}
	return done, err
}

// sentCodes checks sent.lua's reply v for n sends, or returns the call's
// error: a code per send, or 0 alone when every code is 0 or 1 (codes is
// then nil; see sentCode).
func sentCodes(v any, err error, n int) (codes []any, _ error) {
	if err != nil || v == int64(0) {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("store: unexpected reply %v", v)
	}
	return a, nil
}

// sentCode returns the i-th send's code of codes from sentCodes.
func sentCode(codes []any, i int) int64 {
	if codes == nil {
		return 0
	}
	c, _ := codes[i].(int64)
	return c
}

// sentAtOnce applies the code sent.lua answered for reservation id,
// recorded as rec; see confirmAtOnce.
func (s *Store) sentAtOnce(b *redisBudget, id uint64, rec record, p store.Policy, leftAt, code int64) (done bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, mine := b.outstanding[id]
	if !mine {
		return true, store.ErrUnknownReservation // released meanwhile
	}
	if code == 0 {
		delete(b.outstanding, id)
		s.sentLate(b, p, rec, leftAt)
		return true, nil
	}
	cur.member = rec.member[1:]
	b.outstanding[id] = cur
	return false, nil
}
