package redisstore

import (
	"context"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// A slow link. A reserve or a confirm that lets a request go records its
// send in Redis when the script runs, and the request leaves when the
// reply arrives: the reply's delay later. The other processes count the
// send at its record, so a reply that comes late lets them reuse its slot
// that much early, and the budget goes over at the server.
//
// A process cannot tell a reply's delay: a round trip also holds the
// delay before the call reached Redis. But it knows when the request
// left, and an instant no later than its send's record: the reserve's
// reply says when it decided, and a confirm ran no earlier than the call
// left, on the server's clock as a reply of the budget's server last put
// it, which is never ahead of it (see recordedFrom). So when a round trip
// that let a request go took longer than slowTrip, the store moves in the
// background (lua/lag.lua) the earliest send the window counts from that
// instant on (its own, or one earlier still) to where the request left,
// as Redis's clock tells it when the background call arrives. Every
// window to come that held the send it moved holds the instant it moved
// to, or the send's own record, later still: no window counts fewer sends
// than reached the server. The reservations the move crowds move later.

// slowTrip is the round trip above which a send is recorded again where
// its request left. Loopback round trips stay well under it, and an
// error this small is a fraction of a percent of a timespan of a second.
const slowTrip = 2 * time.Millisecond

// timedCall is call, also returning when the reply arrived and how long
// the round trip took, µs of the local clock.
func (s *Store) timedCall(ctx context.Context, sc *script, b *redisBudget, args []any) (v any, replied, trip int64, err error) {
	start := s.localMicros()
	v, err = s.call(ctx, sc, b, args)
	replied = s.localMicros()
	return v, replied, replied - start, err
}

// sentAfterTrip notes that a request of budget b, let go by a script
// whose reply arrived at µs replied of the local clock after a round trip
// of trip µs, left: a window's send, recorded no earlier than from (µs of
// the server's clock), is recorded again where it left when the round
// trip was slow.
func (s *Store) sentAfterTrip(b *redisBudget, p store.Policy, replied, trip, from int64) {
	if trip <= micros(slowTrip) || p.Strategy == store.StrategyLinear {
		return
	}
	s.queueSent(sentSend{b: b, at: replied, from: from})
}

// sentAtOnceAfterTrip is sentAfterTrip for a reserve's reply rep that
// let its request go at once. A request that claimed a freed slot is
// recorded among the entries of W, not in the ring, which the move does
// not search: it stays where it was recorded.
func (s *Store) sentAtOnceAfterTrip(b *redisBudget, p store.Policy, rep reply) {
	if !rep.record().keptAsSend() {
		s.sentAfterTrip(b, p, rep.replied, rep.trip, rep.now)
	}
}

// recordedFrom returns the server's time at µs at of the local clock, or
// earlier: from the skew a reply of b's server last measured, whose
// decision came before the reply, so never ahead.
func (b *redisBudget) recordedFrom(at int64) int64 { return at + b.skew.Load() }

// recordLags records sends xs of one budget, let go after slow round
// trips, where they left (see lua/lag.lua). A failed call leaves them
// where they were recorded: a little early, as without this record.
func (s *Store) recordLags(ctx context.Context, xs []sentSend) {
	b := xs[0].b
	p := b.currentPolicy()
	offset := s.offset.Load()
	args := s.argsAt(p, hereNot, offset, 2*len(xs))
	for _, x := range xs {
		args = append(args, s.offsetAt(x.at)-offset, x.from)
	}
	if _, err := s.call(ctx, scriptLag, b, args); err != nil {
		s.log.V(1).Info("could not record sends after a slow round trip; they count where Redis decided them", "budget", b.key, "error", err.Error())
	}
}
