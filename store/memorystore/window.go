package memorystore

import (
	"iter"
	"slices"
	"sort"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// freedID marks a released entry of a window: it still counts, so that the
// reservations made after it stay valid, until a newcomer claims it.
const freedID = ^uint64(0)

// windowEntry is one reserved send instant. id is 0 for a request admitted
// at once, the reservation's ID while it waits, freedID once released.
type windowEntry struct {
	at int64
	id uint64
}

// window is the state of a budget under store.StrategyWindow: every send
// instant reserved in the last timespan and after it, in order. The first
// head entries are dead and reused on compaction.
//
// The arithmetic is exact on send instants. A new entry t needs the L-th
// latest entry s to lie at least one timespan before it (t >= s + span):
// only the L-1 entries after s can then share a window of one timespan
// with t, wherever t falls among them. Taking slots no earlier than the
// latest slot given out keeps arrival order; that floor is taken before
// jitter, so that jitter spreads requests without piling up along the
// queue.
type window struct {
	limit    int
	span     int64
	entries  []windowEntry
	head     int
	freed    int   // released entries still in entries[head:]
	lastBase int64 // the latest slot given out, before its jitter
}

// setPolicy implements schedule.
func (w *window) setPolicy(p store.Policy) { w.limit, w.span = limits(p) }

// reserve implements schedule. A reservation admitted at once is recorded
// as a send (ID 0), whatever id, unless r asks for it to be confirmed.
func (w *window) reserve(now, cd int64, id uint64, r store.Request) (slot int64, ok bool) {
	limit, span := w.limit, w.span
	w.trim(now - span)
	t0 := max(now, cd)
	live := w.entries[w.head:]

	slot = max(t0, w.lastBase)
	if n := len(live); n >= limit {
		slot = max(slot, live[n-limit].at+span)
	}
	claim := -1
	if w.freed > 0 {
		if i := w.firstFreed(t0); i >= 0 && live[i].at <= slot {
			claim, slot = i, live[i].at
		}
	}
	base, wait := slot, slot-now
	if claim < 0 && wait > 0 {
		slot += jitterWithin(wait, r)
		wait = slot - now
	}
	if wait > int64(r.MaxWait) {
		return slot, false
	}
	if wait == 0 && !r.Deferred {
		id = 0
	}
	if claim >= 0 {
		live[claim].id = id
		w.freed--
		return slot, true
	}
	w.insert(windowEntry{at: slot, id: id})
	w.lastBase = base
	return slot, true
}

// insert adds e in order, after the entries at the same instant. Without
// jitter that is always at the end.
func (w *window) insert(e windowEntry) {
	live := w.entries[w.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].at > e.at })
	w.entries = slices.Insert(w.entries, w.head+i, e)
}

// jitterWithin returns the part of r.Jitter that keeps a wait within
// r.MaxWait.
func jitterWithin(wait int64, r store.Request) int64 {
	j := int64(r.Jitter)
	if j <= 0 {
		return 0
	}
	if room := int64(r.MaxWait) - wait; room < j {
		return max(room, 0)
	}
	return j
}

// trim drops the entries at or before the instant old, which no longer
// constrain any slot from now on, and compacts the slice when more than
// half of it is dead.
func (w *window) trim(old int64) {
	for w.head < len(w.entries) && w.entries[w.head].at <= old {
		if w.entries[w.head].id == freedID {
			w.freed--
		}
		w.head++
	}
	if w.head == len(w.entries) {
		w.entries, w.head = w.entries[:0], 0
		return
	}
	if w.head > 64 && w.head > len(w.entries)/2 {
		n := copy(w.entries, w.entries[w.head:])
		w.entries, w.head = w.entries[:n], 0
	}
}

// firstFreed returns the index in the live entries of the earliest
// released entry at or after t, or -1.
func (w *window) firstFreed(t int64) int {
	live := w.entries[w.head:]
	for i := sort.Search(len(live), func(i int) bool { return live[i].at >= t }); i < len(live); i++ {
		if live[i].id == freedID {
			return i
		}
	}
	return -1
}

// sent implements schedule: the entry of reservation id, at slot,
// becomes a send.
func (w *window) sent(id uint64, slot int64) {
	if i := w.find(id, slot); i >= 0 {
		w.entries[w.head+i].id = 0
	}
}

// find returns the index in the live entries of reservation id's entry,
// at at, or -1.
func (w *window) find(id uint64, at int64) int {
	live := w.entries[w.head:]
	for i := sort.Search(len(live), func(i int) bool { return live[i].at >= at }); i < len(live) && live[i].at == at; i++ {
		if live[i].id == id {
			return i
		}
	}
	return -1
}

// release implements schedule: it marks the entry of reservation id,
// reserved at at, as freed.
func (w *window) release(id uint64, at int64) {
	if i := w.find(id, at); i >= 0 {
		w.entries[w.head+i].id = freedID
		w.freed++
	}
}

// shift implements schedule: it moves every entry after now later by the
// same amount, so that the earliest comes no sooner than until, and
// returns that amount (0 when nothing had to move). Entries at or before
// now are sent and stay. The pending reservations are among the entries.
func (w *window) shift(now, until int64, _ iter.Seq[int64]) int64 {
	live := w.entries[w.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].at > now })
	if i == len(live) || live[i].at >= until {
		return 0
	}
	delta := until - live[i].at
	for ; i < len(live); i++ {
		live[i].at += delta
	}
	if w.lastBase > now {
		w.lastBase += delta
	}
	return delta
}

// idleAt implements schedule.
func (w *window) idleAt() int64 {
	if w.head == len(w.entries) {
		return 0
	}
	return w.entries[len(w.entries)-1].at + w.span
}

// seed implements schedule: a send within the last timespan is an entry.
func (w *window) seed(at, now int64) {
	if at > now-w.span {
		w.insert(windowEntry{at: at})
	}
}

// sendLate implements schedule. It records that the reservation id,
// reserved at slot, is confirmed at now, later than its slot (its waiter woke late), so that the window
// holds on the instants requests really leave, and returns when it may
// leave: now, unless requests already sent out of order (later
// reservations whose waiters confirmed first) leave no room until later.
// The entry moves to that instant - still waiting if it is after now - and
// every reservation not yet sent that it crowds moves later too, as little
// as keeps the window and the order; also those whose slot has come but
// whose waiters, late too, have not confirmed yet, or late waiters woken
// together would all leave together. moved is called for each reservation
// that moves.
//
// A reservation more than a timespan late may have left the window already
// (trimmed by a later reservation): it then takes a slot again, at the
// back, as a newcomer would, so that its send is counted.
func (w *window) sendLate(id uint64, slot, now, cd int64, moved func(id uint64, at int64)) int64 {
	limit, span := w.limit, w.span
	live := w.entries[w.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].at >= slot })
	for i < len(live) && live[i].at == slot && live[i].id != id {
		i++
	}
	if i == len(live) || live[i].id != id {
		at, _ := w.reserve(now, cd, id, store.Request{MaxWait: store.NoMaxWait})
		return at
	}
	t := max(now, cd) // nothing leaves while a cooldown lasts
	if c, ok := w.lthLeaving(i, now, limit); ok {
		t = max(t, c+span)
	}
	e := windowEntry{at: t}
	if t > now {
		e.id = id // it waits on
	}
	live[i] = e
	// The reservations after it that are due but not sent come no earlier
	// than it, in their order, after the sends already made.
	k := i + 1
	var touched []uint64
	for ; k < len(live) && live[k].at < t; k++ {
		if x := &live[k]; x.id != 0 {
			x.at = t
			touched = append(touched, x.id)
		}
	}
	sort.SliceStable(live[i:k], func(a, b int) bool {
		x, y := live[i+a], live[i+b]
		return x.at < y.at || (x.at == y.at && x.id == 0 && y.id != 0)
	})
	for j := i + 1; j < len(live); j++ {
		x := &live[j]
		if x.id == 0 {
			continue // sent: it cannot move
		}
		want := live[j-1].at
		if j >= limit {
			want = max(want, live[j-limit].at+span)
		}
		if want <= x.at {
			continue
		}
		x.at = want
		touched = append(touched, x.id)
	}
	w.reportMoved(i, touched, moved)
	if t == now {
		return now
	}
	for _, x := range w.entries[w.head+i:] {
		if x.id == id {
			return x.at
		}
	}
	return t
}

// lthLeaving returns the limit-th latest instant among the requests that
// leave no later than now besides the live entry i: every entry before it,
// and the sends already made after it (out of order). ok is false when
// there are fewer than limit.
func (w *window) lthLeaving(i int, now int64, limit int) (int64, bool) {
	live := w.entries[w.head:]
	c := make([]int64, 0, limit+1)
	for j := max(0, i-limit); j < i; j++ {
		c = append(c, live[j].at)
	}
	for j := i + 1; j < len(live) && live[j].at <= now; j++ {
		if live[j].id == 0 {
			c = append(c, live[j].at)
		}
	}
	if len(c) < limit {
		return 0, false
	}
	slices.Sort(c)
	return c[len(c)-limit], true
}

// reportMoved calls moved with the instant of each reservation in ids
// (freed entries aside), found at or after index i of the live entries.
func (w *window) reportMoved(i int, ids []uint64, moved func(id uint64, at int64)) {
	if len(ids) == 0 {
		return
	}
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = id != freedID
	}
	for _, e := range w.entries[w.head+i:] {
		if want[e.id] {
			moved(e.id, e.at)
			want[e.id] = false
		}
	}
}
