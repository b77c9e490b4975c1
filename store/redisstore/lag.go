package redisstore

import (
	"sync/atomic"
	"time"
)

// A process whose replies from Redis come late sends later than Redis
// decided: with replies 100ms late, each of its sends would be recorded
// 100ms before it reaches the API server, and the other processes sharing
// the budget would take those slots again 100ms too soon. So a `window`
// script that lets a request go records its send lag later than it runs
// (lua/reserve_window.lua, lua/confirm.lua): no sooner than the request
// can leave, as the reply takes at most a round trip. The record is only
// as right as the lag is: a send recorded later than it left can crowd a
// window that ends before the record, as one recorded earlier crowds one
// that starts after it. So only a link slow on every call of late counts:
// round trips below lagFloor, those of a healthy or a busy link, add
// nothing.
const lagFloor = 20 * time.Millisecond

// lagCalls is how many of the latest round trips the lag is the least
// of: a slow link makes every one slow, a busy moment only some.
const lagCalls = 8

// roundTrips holds the latest round trips to Redis, µs.
type roundTrips struct {
	next atomic.Uint64
	us   [lagCalls]atomic.Int64
}

// note records the round trip d of a call that Redis answered.
func (r *roundTrips) note(d time.Duration) {
	r.us[r.next.Add(1)%lagCalls].Store(micros(d))
}

// lag returns how late after a script's decision this process's request
// leaves, at the latest (µs): the least of its latest round trips to
// Redis when that is lagFloor or more, else 0.
func (r *roundTrips) lag() int64 {
	least := r.us[0].Load()
	for i := 1; i < lagCalls; i++ {
		least = min(least, r.us[i].Load())
	}
	if least < micros(lagFloor) {
		return 0
	}
	return least
}
