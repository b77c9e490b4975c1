package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// Options tunes a Redis store. The zero value takes the defaults.
type Options struct {
	// Timeout bounds every call to Redis. Default 500ms. The client should
	// honour context deadlines (go-redis: ContextTimeoutEnabled), as the
	// clients NewFromURL builds do.
	//
	// A call made for a request (its Reserve, its waiter's Confirm, its
	// Release) is bounded sooner by what is left of the request's max
	// wait, but never below 50ms, so that a healthy Redis still decides
	// a request that may not wait at all, and by the context's deadline.
	// A call cut short by that bound decides its request alone by the
	// failure policy; the outage starts only when Redis does not answer
	// a background check within Timeout.
	Timeout time.Duration
	// Failure is the policy while Redis is down. Default FailureLocal.
	Failure store.FailurePolicy
	// Presence is how often this process refreshes its presence on each
	// budget it uses. A process that misses 1.5 intervals is gone: its
	// reservations still ahead stop counting. Default 2s.
	Presence time.Duration
	// Logger receives the store's logs: a store that cannot be used and
	// its recovery (once each, naming the cause and the server, its URL
	// redacted) and warnings about the server. Default: klog's logger
	// (k8s.io/klog/v2), as client-go logs.
	Logger logr.Logger
	// OnEvent, when set, is told of store errors and outage transitions,
	// for metrics. It must return quickly.
	OnEvent func(store.Event)
}

// Store is a store.Store that keeps budgets in Redis, shared by every process
// that uses the same budget keys (the same owner and API server).
//
// Each decision is one atomic Lua script on the Redis server, on the
// server's clock, so processes whose clocks disagree still share one exact
// window. All keys of a budget share one Cluster slot and expire by
// themselves. Processes sharing a budget announce their presence; the
// reservations of a process that disappears stop counting once its
// presence expires. A process records reservations at most one timespan
// ahead in Redis: requests beyond that wait in-process, in arrival order,
// until their turn comes within reach.
//
// While Redis cannot be reached, the FailurePolicy decides, and Redis is
// probed in the background about once a second until it answers.
//
// Redis 7 or later (or Valkey) with maxmemory-policy noeviction is
// required: an evicted budget is a silent reset.
type Store struct {
	client  redis.UniversalClient
	opts    Options
	log     logr.Logger
	url     string // the server, for reports: its URL redacted
	proc    string // this process's name in the budgets it shares
	procArg any    // proc as an argument, made once
	ttl     time.Duration
	epoch   time.Time

	seq     atomic.Uint64
	offset  atomic.Int64 // µs added to the server's time, by tests only (export_test.go)
	skew    atomic.Int64 // µs from localMicros to the server's time
	budgets sync.Map     // string -> *redisBudget

	down      atomic.Bool
	failover  sync.RWMutex // local decisions (read) against the end of an outage (write)
	outages   atomic.Int64 // outages so far
	downSince atomic.Int64 // localMicros the current outage started
	lastErr   atomic.Pointer[error]
	cause     atomic.Pointer[string] // the cause of the outage last reported
	nextProbe atomic.Int64           // localMicros of the next probe in an outage
	fallback  *memorystore.Store
	ownClient bool // made by the store, closed by Close
	lib       libraryLoader

	notify notifier
	sentQ  sentQueue // sends to record, see Sent
	cutQ   cutQueue  // what calls cut short left for Redis, see bound.go

	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Notifier   = (*Store)(nil)
	_ store.SeatSharer = (*Store)(nil)
	_ store.Failover   = (*Store)(nil)
	_ store.Sender     = (*Store)(nil)
)

// fallbackID tags the IDs of reservations the fallback store made.
const fallbackID = uint64(1) << 63

// New returns a store that keeps its budgets in Redis through client
// (standalone, Sentinel or Cluster). It starts a goroutine that refreshes
// this process's presence; Close stops it and releases this process's
// reservations.
func New(client redis.UniversalClient, opts Options) *Store {
	return newStore(client, clientURL(client), opts, false)
}

// newStore is New; own reports that the store made client, with
// timeouts of its own, and closes it. url names the server in reports,
// redacted.
func newStore(client redis.UniversalClient, url string, opts Options, own bool) *Store {
	if opts.Timeout <= 0 {
		opts.Timeout = 500 * time.Millisecond
	}
	if opts.Failure == "" {
		opts.Failure = store.FailureLocal
	}
	if opts.Presence <= 0 {
		opts.Presence = 2 * time.Second
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = klogLogger()
	}
	s := &Store{
		client:    client,
		opts:      opts,
		log:       log.WithName("redis-store"),
		url:       url,
		proc:      processName(),
		ttl:       opts.Presence * 3 / 2,
		epoch:     time.Now(),
		fallback:  memorystore.New(nil),
		done:      make(chan struct{}),
		ownClient: own,
	}
	s.procArg = s.proc
	s.sentQ.kick = make(chan struct{}, 1)
	s.wg.Add(3)
	go s.refreshPresence()
	go s.checkServer()
	go s.recordSends()
	return s
}

// NewFromURL returns a store on a client built from a redis:// or
// rediss:// (TLS) URL, with timeouts that make every call honour the
// store's Timeout. A URL with addr= query parameters names the nodes of a
// Redis Cluster. Close closes the client too.
//
// The first store NewFromURL makes in a process sends go-redis's own log
// lines (redis.SetLogger, which is process-wide) to klog at V(1), not to
// raw standard error (see log.go). A program that wants them elsewhere
// calls redis.SetLogger after making its first store.
func NewFromURL(rawURL string, opts Options) (*Store, error) {
	client, err := clientFromURL(rawURL, opts.Timeout)
	if err != nil {
		return nil, err
	}
	routeGoRedisLogs()
	return newStore(client, RedactURL(rawURL), opts, true), nil
}

// processName returns a random name for this process in shared budgets.
func processName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Down reports whether the store is in an outage, deciding by its failure
// policy.
func (s *Store) Down() bool { return s.down.Load() }

// localMicros returns the time elapsed since the store was made, on the local
// monotonic clock, plus the test offset, in µs.
func (s *Store) localMicros() int64 {
	return int64(time.Since(s.epoch)/time.Microsecond) + s.offset.Load()
}

// offsetAt returns the time offset of the scripts (ARGV[1], see
// lua/hot.lua) that makes a script decide at µs at of the local clock, as
// if it ran then.
func (s *Store) offsetAt(at int64) int64 {
	return at - int64(time.Since(s.epoch)/time.Microsecond)
}

// serverMicros estimates the Redis server's time now, from the last decision
// it made. It serves in-process waiting only, never admission decisions.
func (s *Store) serverMicros() int64 { return s.localMicros() + s.skew.Load() }

// redisBudget is this process's view of one budget.
type redisBudget struct {
	key     string
	keys    []string
	keyArgs []any // keys as arguments, made once

	procs atomic.Int64 // processes last seen sharing it; 0 until counted
	rank  atomic.Int64 // this process's place among them, by name
	// joinUntil is the localMicros until which this process takes no
	// seat, having joined others (see joinWait).
	joinUntil atomic.Int64

	sends  sendLog      // this process's sends in the last timespan
	seeded atomic.Int64 // the outage whose local budget was seeded with them

	report   atomic.Pointer[func() (limit, inUse int)] // seats report, see ReportSeats
	reported atomic.Pointer[string]                    // the report last written
	lastUsed atomic.Int64                              // localMicros of the last Reserve
	skew     atomic.Int64                              // µs from localMicros to its server's time, or less (see recordedFrom)
	lastHere atomic.Int64                              // localMicros this process last refreshed its presence
	born     int64                                     // localMicros this process first used it

	mu          sync.Mutex
	policy      store.Policy
	held        []*heldRequest          // waiting in-process, in arrival order
	heldByID    map[uint64]*heldRequest // the same, by ID
	outstanding map[uint64]record       // deferred reservations recorded in Redis
	ready       map[uint64]struct{}     // held requests whose slot came when recorded
	migrated    map[uint64]uint64       // reservations of an outage's local budget -> their reservations in Redis since
	timer       *time.Timer             // promotes the first held request
}

func (s *Store) budget(key string) *redisBudget {
	if v, ok := s.budgets.Load(key); ok {
		return v.(*redisBudget)
	}
	b := &redisBudget{key: key, keys: redisKeys(key), heldByID: map[uint64]*heldRequest{}, outstanding: map[uint64]record{}, ready: map[uint64]struct{}{}, migrated: map[uint64]uint64{}}
	b.keyArgs = make([]any, len(b.keys))
	for i, k := range b.keys {
		b.keyArgs[i] = k
	}
	b.lastHere.Store(math.MinInt64 / 2)
	b.born = s.localMicros()
	v, _ := s.budgets.LoadOrStore(key, b)
	return v.(*redisBudget)
}

func (s *Store) existing(key string) (*redisBudget, bool) {
	v, ok := s.budgets.Load(key)
	if !ok {
		return nil, false
	}
	return v.(*redisBudget), true
}

// member returns the name under which this process records a reservation
// made order-th among its reservations (see lua/hot.lua): its place, 'r',
// order in 13 base-36 digits and this process's name, so that entries at
// one instant sort in the order they were reserved, then ':' and this
// process's name, the one holding it. A reservation that claims a released
// slot takes over the slot's place instead: the reserve scripts return the
// name recorded.
func (s *Store) member(order uint64) string {
	digits := strconv.FormatUint(order, 36)
	return "r" + strings.Repeat("0", orderDigits-len(digits)) + digits + s.proc + ":" + s.proc
}

// orderDigits is the width of the sequence number in a member's name: a
// uint64 in base 36.
const orderDigits = 13

// micros converts a duration to whole microseconds, at least 1 when positive.
func micros(d time.Duration) int64 {
	if d > 0 && d < time.Microsecond {
		return 1
	}
	return int64(d / time.Microsecond)
}

// A process's requests on a budget refresh its presence and count the
// processes sharing it (for FailureLocal's share and the seats' shares)
// every presence interval, so that a process that only ever sends at once
// stays present (its presence lapses after 1.5 intervals); every request
// does (countEarly) in its first earlyFor on the budget, when processes
// starting together must see each other within their first burst: a
// process that still believes itself alone holds the whole concurrency
// limit, and the throttle its burst draws is cut as if it were alone. The
// count is part of the script each request runs anyway: no round trip
// more.
const (
	countEarly = 0
	earlyFor   = 5 * time.Second
)

// The presence flags of the scripts' arguments (see lua/hot.lua): whether
// a call refreshes this process's presence on the budget.
const (
	hereNot     = 0 // no
	hereCount   = 1 // yes, and counts the processes sharing it
	hereIfAhead = 2 // only if it records a reservation ahead
)

// args returns the arguments every script starts with (see lua/hot.lua),
// followed by room for n more. They ask to refresh this process's
// presence on the budget, and count the processes sharing it, when force
// is set or a presence interval has passed; to refresh it only with a
// reservation ahead when it was last refreshed half a presence interval
// ago.
func (s *Store) args(b *redisBudget, p store.Policy, force bool, n int) []any {
	return s.argsHere(p, s.presenceFlag(b, force), n)
}

// argsHere is args with the presence flag here given.
func (s *Store) argsHere(p store.Policy, here int64, n int) []any {
	return s.argsAt(p, here, s.offset.Load(), n)
}

// argsAt is argsHere with the time offset given: a script then decides at
// the local clock's now plus offset, as the server's clock tells it. nums
// are the script's own numbers, packed after those every script takes.
func (s *Store) argsAt(p store.Policy, here, offset int64, n int, nums ...int64) []any {
	d := hotNumbers(p, s.ttl, here, offset)
	d.add(nums...)
	a := make([]any, 2, 2+n)
	a[0], a[1] = d, s.procArg
	return a
}

// hotNumbers returns the numbers every script takes, in the order
// lua/hot.lua's begin reads them: the time offset, 1 for a window budget,
// how long a presence lasts (ttl), p's timespan and the presence flag.
func hotNumbers(p store.Policy, ttl time.Duration, here, offset int64) *doubles {
	var windowed int64
	if p.Strategy != store.StrategyLinear {
		windowed = 1
	}
	return packed(offset, windowed, micros(ttl), micros(max(p.Timespan, time.Microsecond)), here)
}

// presenceFlag returns args' presence flag, taking the turn to count the
// processes when it is due.
func (s *Store) presenceFlag(b *redisBudget, force bool) int64 {
	here := int64(hereNot)
	now, last := s.localMicros(), b.lastHere.Load()
	every := micros(s.opts.Presence)
	if now-b.born < micros(earlyFor) {
		every = micros(countEarly)
	}
	switch {
	case force || (now-last >= every && b.lastHere.CompareAndSwap(last, now)):
		here = hereCount
	case now-last >= micros(s.opts.Presence/2):
		here = hereIfAhead
	}
	return here
}

// call runs a script with the store's timeout, or the shorter bound of
// the request it is made for (see callFloor): a call cut short by that
// bound fails with a *cutShortError.
//
// The whole call is bounded, not each step: a client's own timeouts
// bound its pool wait, its write and its read one by one, which add up
// to twice the timeout and more when every connection is stuck on a
// frozen Redis.
func (s *Store) call(ctx context.Context, sc *script, b *redisBudget, args []any) (any, error) {
	bound, short := s.callBound(ctx)
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	v, err := s.runKeys(cctx, s.client, sc, b.keys, b.keyArgs, args).Result()
	if err != nil && short && ctx.Err() == nil && timedOut(err) {
		return v, &cutShortError{err: err}
	}
	return v, err
}

// reply is a reserve script's answer.
type reply struct {
	status  int64 // refused, recorded or toHold
	wait    time.Duration
	cooling bool
	now     int64 // the server's time of the decision, µs
	mark    int64 // window: the slot before jitter; linear: the theoretical arrival time after it; µs
	base    int64 // the slot before jitter, µs
	member  string
	replied int64 // when the reply arrived, µs of the local clock
	trip    int64 // how long the round trip took, µs
}

// record is a deferred reservation recorded in Redis, as the confirm
// script needs it.
type record struct {
	member string // its name there
	at     int64  // when it was recorded, µs of the server's clock
	mark   int64  // as reply.mark
	logged int64  // admitted at once: when its send was logged at its slot, µs of the local clock; 0: not logged
	until  int64  // when its request must be decided by, µs of the local clock; 0: no sooner than the store's timeout
}

// keptAsSend reports whether the reservation was admitted at once and is
// kept as a send at its slot (named '=' and its member) until its request
// leaves (see lua/sent.lua).
func (r record) keptAsSend() bool { return strings.HasPrefix(r.member, "=") }

// record returns what a reply that recorded a reservation says of it.
func (r reply) record() record { return record{member: r.member, at: r.now, mark: r.mark} }

const (
	refused  = 0
	recorded = 1
	toHold   = 2
)

// reserve runs the reserve script of p's strategy for the reservation made
// order-th by this process (see member), queued after the requests held
// in-process (held). ahead bounds how far a
// reservation may be recorded. promoted, when not nil, is the held request
// id being recorded: at its estimated slot, where what Redis holds leaves
// room for it there.
func (s *Store) reserve(ctx context.Context, b *redisBudget, p store.Policy, r store.Request, order uint64, held []*heldRequest, ahead time.Duration, promoted *heldRequest) (reply, error) {
	limit := max(p.Limit, 1)
	span := max(p.Timespan, time.Microsecond)
	var est, estMark, released int64
	if promoted != nil {
		est, estMark = promoted.slot, promoted.mark
		if promoted.freed {
			released = 1
		}
	}
	var last int64 // the theoretical arrival time after the held requests (linear), the latest slot given to them (window)
	if n := len(held); n > 0 {
		last = held[n-1].mark
	}
	here := s.presenceFlag(b, false)
	offset := s.offset.Load()
	// The numbers both strategies take first: the limit, the max wait,
	// the jitter, the requests held before it, how far ahead it may be
	// recorded (µs).
	limitN, maxWait, jitter, heldN, aheadN := int64(limit), micros(r.MaxWait), micros(r.Jitter), int64(len(held)), micros(ahead)
	if p.Strategy == store.StrategyLinear {
		interval := micros(max(span/time.Duration(limit), time.Microsecond))
		args := s.argsAt(p, here, offset, 1, limitN, maxWait, jitter, heldN, aheadN, last, interval, interval*int64(max(p.Burst, 1)-1), est, estMark, released)
		member := s.member(order)
		return s.reserveReply(ctx, b, scriptReserveLinear, append(args, member), member, here)
	}
	first, latest := latestHeld(held, limit)
	// How a request admitted at once is recorded: a send (1), one kept
	// for Sent to move (2, deferred), or a held request being recorded
	// (0, promoted), whose waiter confirms. A request that takes a slot
	// again (its reservation lost, or decided in-process during an
	// outage) and has it now leaves at once: a send.
	var atOnce int64 = 1
	switch {
	case promoted != nil:
		atOnce = 0
	case r.Deferred:
		atOnce = 2
	}
	args := s.argsAt(p, here, offset, 2, limitN, maxWait, jitter, heldN, aheadN, last, int64(first), est, estMark, atOnce, released)
	member := s.member(order)
	args = append(args, member)
	if len(held) > 0 {
		args = append(args, latest)
	}
	return s.reserveReply(ctx, b, scriptReserveWindow, args, member, here)
}

// doubles are numbers as big-endian doubles, one argument that a script
// reads with one struct.unpack: far cheaper, inside Redis, than as many
// arguments, each parsed as a number. Every value is an integer below
// 2^53, exact as a double. go-redis writes them as they are
// (encoding.BinaryMarshaler), and a pointer is an argument that costs no
// allocation of its own.
type doubles struct {
	n int
	b [maxDoubles * 8]byte
}

// maxDoubles bounds the numbers of one argument: those every script
// takes and a reservation's.
const maxDoubles = 16

// packed returns xs as doubles.
func packed(xs ...int64) *doubles {
	d := &doubles{}
	d.add(xs...)
	return d
}

// add appends xs.
func (d *doubles) add(xs ...int64) {
	for _, x := range xs {
		binary.BigEndian.PutUint64(d.b[8*d.n:], math.Float64bits(float64(x)))
		d.n++
	}
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (d *doubles) MarshalBinary() ([]byte, error) { return d.b[:8*d.n], nil }

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// decodeReply reads a reserve script's reply v (see answer in
// lua/hot.lua): {status, wait µs, cooling 0/1, now µs, base µs, mark µs,
// processes, rank, name}, the processes and rank -1 when not counted.
func decodeReply(v any) (rep reply, procs, rank int64, err error) {
	a, ok := v.([]any)
	if !ok || len(a) != 9 {
		return reply{}, -1, -1, fmt.Errorf("store: unexpected reply %v", v)
	}
	var n [8]int64
	for i := range n {
		if n[i], ok = a[i].(int64); !ok {
			return reply{}, -1, -1, fmt.Errorf("store: unexpected reply %v", v)
		}
	}
	member, ok := a[8].(string)
	if !ok {
		return reply{}, -1, -1, fmt.Errorf("store: unexpected reply %v", v)
	}
	rep = reply{status: n[0], wait: time.Duration(n[1]) * time.Microsecond, cooling: n[2] != 0,
		now: n[3], base: n[4], mark: n[5], member: member}
	return rep, n[6], n[7], nil
}

// reserveReply runs reserve script sc with args, whose presence flag is
// here, for the reservation named member, and reads its reply.
func (s *Store) reserveReply(ctx context.Context, b *redisBudget, sc *script, args []any, member string, here int64) (reply, error) {
	v, replied, trip, err := s.timedCall(ctx, sc, b, args)
	if err != nil {
		return reply{}, err
	}
	rep, procs, rank, err := decodeReply(v)
	if err != nil {
		return reply{}, err
	}
	rep.replied, rep.trip = replied, trip
	if procs >= 0 {
		s.counted(b, procs, rank)
	}
	if rep.status == recorded && rep.wait > 0 && here == hereIfAhead {
		b.lastHere.Store(s.localMicros()) // the script refreshed the presence
	}
	s.skew.Store(rep.now - s.localMicros())
	b.skew.Store(rep.now - rep.replied)
	return rep, nil
}

// Reserve implements store.Store.
func (s *Store) Reserve(ctx context.Context, key string, p store.Policy, r store.Request) (store.Reservation, error) {
	if s.down.Load() {
		return s.fallbackReserve(ctx, key, p, r)
	}
	until := s.untilFor(r.MaxWait)
	ctx = withUntil(ctx, until)
	b := s.budget(key)
	b.lastUsed.Store(s.localMicros())
	id := s.seq.Add(1)
	// A failed call decides the request by the failure policy.
	onFail := func(err error) (store.Reservation, error) {
		return failedFor(s, ctx, err,
			func() (store.Reservation, error) { return s.fallbackReserve(ctx, key, p, r) },
			func() (store.Reservation, error) { return s.decideCut(b, p, r, id, err) })
	}
	b.mu.Lock()
	b.policy = p
	if err := s.promoteDueLocked(ctx, b); err != nil {
		b.mu.Unlock()
		return onFail(err)
	}
	if len(b.held) > 0 {
		// Requests of this process already wait in-process: queue behind
		// them, holding the lock so that the queue's order is the order of
		// the estimates.
		defer b.mu.Unlock()
		rep, err := s.reserve(ctx, b, p, r, id, b.held, p.Timespan, nil)
		if err != nil {
			return onFail(err)
		}
		return s.answerLocked(b, id, r, rep, until), nil
	}
	b.mu.Unlock()

	rep, err := s.reserve(ctx, b, p, r, id, nil, p.Timespan, nil)
	if err != nil {
		return onFail(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if rep.status == toHold && len(b.held) > 0 {
		// Another request of this process was held meanwhile: estimate
		// again behind it.
		if rep, err = s.reserve(ctx, b, p, r, id, b.held, p.Timespan, nil); err != nil {
			return onFail(err)
		}
	}
	return s.answerLocked(b, id, r, rep, until), nil
}

// answerLocked turns a reserve script's reply into a Reservation, holding
// the request in-process when the script said so. until is when the
// request must be decided by (see record.until). b.mu must be held.
func (s *Store) answerLocked(b *redisBudget, id uint64, r store.Request, rep reply, until int64) store.Reservation {
	if res, ok := s.claimHeldLocked(b, id, r, rep); ok {
		return res
	}
	res := store.Reservation{OK: rep.status != refused, Wait: rep.wait, Cooldown: rep.cooling}
	switch {
	case rep.status == refused:
	case rep.wait == 0 && r.Deferred && b.policy.Strategy != store.StrategyLinear:
		// Recorded as a send, at its slot, which no other request's
		// Confirm moves; its own moves it to where it really leaves (see
		// lua/sent.lua).
		// It is in this process's send log from its slot, as in Redis, so
		// that an outage starting before it leaves counts it locally.
		res.ID = id
		rec := rep.record()
		if !rec.keptAsSend() {
			rec.member = "=" + rec.member
		}
		rec.logged = s.sent(b, b.policy)
		rec.until = until
		b.outstanding[id] = rec
	case rep.wait == 0:
		s.sent(b, b.policy)
		s.sentAtOnceAfterTrip(b, b.policy, rep)
	case rep.status == toHold:
		res.ID = id
		s.holdLocked(b, id, r, rep)
	default:
		res.ID = id
		rec := rep.record()
		rec.until = until
		b.outstanding[id] = rec
	}
	return res
}

// Confirm implements store.Store.
func (s *Store) Confirm(ctx context.Context, key string, id uint64) (time.Duration, error) {
	b, ok := s.existing(key)
	if id&fallbackID != 0 {
		if !ok {
			return s.fallback.Confirm(ctx, key, id&^fallbackID)
		}
		if b.isMigrated(id) {
			// Taken over by Redis when an outage ended, its local
			// reservation released: its reservation there decides, also
			// in an outage since (see confirmMigrated).
			return s.confirmMigrated(ctx, key, b, id)
		}
		var left time.Duration
		var err error
		if s.decideLocally(func() {
			left, err = s.fallback.Confirm(ctx, key, id&^fallbackID)
			if err == nil && left == 0 {
				s.sent(b, b.currentPolicy())
			}
		}) {
			return left, err
		}
		return s.confirmMigrated(ctx, key, b, id)
	}
	if !ok {
		return 0, store.ErrUnknownReservation
	}
	return s.confirm(ctx, b, id, 0)
}

// isMigrated reports whether the reservation id of an outage's local
// budget has been taken over by a reservation in Redis.
func (b *redisBudget) isMigrated(id uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.migrated[id]
	return ok
}

// currentPolicy returns the policy the budget was last used with.
func (b *redisBudget) currentPolicy() store.Policy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.policy
}

// confirm is Confirm of a reservation recorded in Redis or held here,
// for a request that left at µs leftAt of the local clock (0: by its
// waiter, now).
func (s *Store) confirm(ctx context.Context, b *redisBudget, id uint64, leftAt int64) (time.Duration, error) {
	if s.down.Load() {
		return s.confirmDuringOutage(b, id)
	}
	b.mu.Lock()
	if s.down.Load() {
		// Redis failed while a promotion of held requests held b.mu.
		b.mu.Unlock()
		return s.confirmDuringOutage(b, id)
	}
	p := b.policy
	if _, ok := b.ready[id]; ok {
		delete(b.ready, id)
		b.mu.Unlock()
		s.sent(b, p)
		return 0, nil
	}
	if h, held := b.heldByID[id]; held {
		left, err := s.confirmHeldLocked(ctx, b, h)
		if err != nil || left > 0 || p.Strategy == store.StrategyLinear {
			b.mu.Unlock()
			if err == nil && left == 0 {
				s.sent(b, p)
			}
			return s.failedConfirm(ctx, b, id, left, err)
		}
		// Recorded just now with its slot come: confirm it like any other,
		// so that the window records it as sent, when it is sent.
	}
	rec, mine := b.outstanding[id]
	if !mine {
		// Released, or confirmed already; a reservation released after its
		// slot stays counted there, as a released one of the memory store.
		b.mu.Unlock()
		return 0, store.ErrUnknownReservation
	}
	holding := len(b.held) > 0
	b.mu.Unlock()
	if leftAt == 0 {
		ctx = withUntil(ctx, rec.until) // its waiter asks
	}
	if rec.keptAsSend() {
		done, err := s.confirmAtOnce(ctx, b, id, rec, p, leftAt)
		if errors.Is(err, store.ErrUnknownReservation) {
			return 0, err
		}
		if err != nil {
			return s.failedConfirmOf(ctx, b, id, rec, err)
		}
		if done {
			return 0, nil
		}
		rec.member = rec.member[1:] // a waiting reservation again, for the script below
	}
	left, tail, err := s.confirmInRedis(ctx, b, p, rec, holding, leftAt)
	if err != nil {
		return s.failedConfirmOf(ctx, b, id, rec, err)
	}
	return s.confirmed(ctx, b, p, id, rec, leftAt, left, tail)
}

// confirmInRedis runs the confirm script for reservation rec, for a
// request that left at µs leftAt of the local clock (0: by its waiter,
// now), holding requests in-process or not. It returns the µs left until
// its slot (-1: Redis lost it) and, after a late send while requests are
// held, the latest entries of the window, in order (see lua/confirm.lua).
func (s *Store) confirmInRedis(ctx context.Context, b *redisBudget, p store.Policy, rec record, holding bool, leftAt int64) (int64, []int64, error) {
	var args []any
	if leftAt == 0 {
		args = s.args(b, p, false, 5)
	} else {
		// Recording a send in the background (see Sent): the script
		// decides at the instant the request left, and leaves the presence
		// and the count of processes to the requests, whose replies carry
		// the count.
		args = s.argsAt(p, hereNot, s.offsetAt(leftAt), 5)
	}
	args = append(args, rec.member, max(p.Limit, 1), b2i(holding), rec.at, rec.mark)
	v, replied, trip, err := s.timedCall(ctx, scriptConfirm, b, args)
	if err != nil {
		return 0, nil, err
	}
	left, ok := v.(int64)
	a, _ := v.([]any)
	if len(a) > 0 {
		left, ok = a[0].(int64)
	}
	if !ok {
		return 0, nil, fmt.Errorf("store: unexpected reply %v", v)
	}
	if left == 0 && leftAt == 0 {
		s.sentAfterTrip(b, p, replied, trip, b.recordedFrom(replied-trip)) // its waiter leaves now
	}
	var tail []int64
	if len(a) > 1 {
		tail = make([]int64, len(a)-1)
		for i, x := range a[1:] {
			tail[i], _ = x.(int64)
		}
	}
	return left, tail, nil
}

// confirmed settles the reservation id, recorded as rec, after Redis
// answered its confirmation: left µs until its slot (-1: lost), tail the
// window's latest entries when a late send may crowd the held requests.
func (s *Store) confirmed(ctx context.Context, b *redisBudget, p store.Policy, id uint64, rec record, leftAt, left int64, tail []int64) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if tail != nil {
		s.crowdHeldLocked(b, tail)
	}
	if _, mine := b.outstanding[id]; !mine {
		// Released or confirmed meanwhile.
		return 0, store.ErrUnknownReservation
	}
	switch {
	case left < 0:
		// Redis lost it (restarted, or this process's presence lapsed):
		// take a slot again under the same ID, after those reserved
		// before, as a newcomer.
		rep, err := s.reserve(ctx, b, p, store.Request{MaxWait: store.NoMaxWait}, s.seq.Add(1), nil, store.NoMaxWait, nil)
		if err != nil {
			return s.failedConfirmOf(ctx, b, id, rec, err)
		}
		if rep.wait == 0 {
			delete(b.outstanding, id)
			s.sent(b, p)
			s.sentAtOnceAfterTrip(b, p, rep)
		} else {
			b.outstanding[id] = rep.record()
		}
		return rep.wait, nil
	case left == 0:
		delete(b.outstanding, id)
		s.sentLate(b, p, rec, leftAt)
	}
	return time.Duration(left) * time.Microsecond, nil
}

// failedConfirm passes on the result of a Confirm, applying the failure
// policy when Redis failed.
func (s *Store) failedConfirm(ctx context.Context, b *redisBudget, id uint64, left time.Duration, err error) (time.Duration, error) {
	if err == nil {
		return left, nil
	}
	return failed(s, ctx, err, func() (time.Duration, error) { return s.confirmDuringOutage(b, id) })
}

// failedConfirmOf applies the failure policy to the failed Confirm of
// reservation id, recorded in Redis as rec, for this request alone when
// its own bound cut the call short.
func (s *Store) failedConfirmOf(ctx context.Context, b *redisBudget, id uint64, rec record, err error) (time.Duration, error) {
	return failedFor(s, ctx, err,
		func() (time.Duration, error) { return s.confirmDuringOutage(b, id) },
		func() (time.Duration, error) { return s.confirmCut(b, id, rec, err) })
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, key string, id uint64) error {
	b, ok := s.existing(key)
	if id&fallbackID != 0 {
		rid, moved := uint64(0), false
		if ok {
			b.mu.Lock()
			rid, moved = b.migrated[id]
			delete(b.migrated, id)
			b.mu.Unlock()
		}
		if !moved {
			return s.fallback.Release(ctx, key, id&^fallbackID)
		}
		id = rid
	}
	if !ok {
		return nil
	}
	b.mu.Lock()
	delete(b.ready, id)
	if s.releaseHeldLocked(b, id) {
		b.mu.Unlock()
		return nil
	}
	rec, mine := b.outstanding[id]
	delete(b.outstanding, id)
	p := b.policy
	b.mu.Unlock()
	if !mine || s.down.Load() || rec.keptAsSend() {
		// A reservation admitted at once has had its slot: it stays
		// counted there.
		return nil
	}
	ctx = withUntil(ctx, rec.until)
	if _, err := s.call(ctx, scriptRelease, b, append(s.args(b, p, false, 1), rec.member)); err != nil {
		_, err = failedFor(s, ctx, err, func() (store.Reservation, error) { return store.Reservation{}, nil },
			func() (store.Reservation, error) { s.cutForget(b, rec.member); return store.Reservation{}, nil })
		return err
	}
	return nil
}

// SetCooldown implements store.Store.
func (s *Store) SetCooldown(ctx context.Context, key string, p store.Policy, d time.Duration) (time.Duration, error) {
	// The fallback keeps the cooldown too, for an outage that starts
	// before it ends.
	local, _ := s.fallback.SetCooldown(ctx, key, s.share(key, p), d)
	if s.down.Load() {
		return local, nil
	}
	b := s.budget(key)
	v, err := s.call(ctx, scriptCooldown, b, append(s.args(b, p, true, 1), micros(max(d, 0))))
	if err != nil {
		return failed(s, ctx, err, func() (time.Duration, error) { return local, nil })
	}
	a, _ := v.([]any)
	if len(a) != 3 {
		return 0, fmt.Errorf("store: unexpected reply %v", v)
	}
	left, moved, now := a[0].(int64), a[1].(int64), a[2].(int64)
	b.mu.Lock()
	s.shiftHeldLocked(b, now+left, moved)
	b.mu.Unlock()
	return time.Duration(left) * time.Microsecond, nil
}

// Cooldown implements store.Store.
func (s *Store) Cooldown(ctx context.Context, key string) (time.Duration, error) {
	if s.down.Load() {
		return s.fallback.Cooldown(ctx, key)
	}
	st, err := s.status(ctx, redisKeys(key))
	if err != nil {
		return failed(s, ctx, err, func() (time.Duration, error) { return s.fallback.Cooldown(ctx, key) })
	}
	return st.Cooldown, nil
}
