package limiter

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// A request that finds no seat free and then queues must not wait for a
// seat given back in between: nobody would give it one later.
func TestSeatFreedBeforeTheWaiterQueuesIsGrantedToIt(t *testing.T) {
	now := time.Unix(0, 0)
	s := &seats{ctl: newControl(Concurrency{Fixed: 1}, now), clock: clocktesting.NewFakeClock(now)}
	held, ok := s.tryTake(now, ClassWrite)
	require.True(t, ok)
	_, ok = s.tryTake(now, ClassWrite)
	require.False(t, ok, "the only seat is held")

	held.free(outcomeUnsent) // given back before the second request queues
	w, _ := s.enqueue(now, ClassWrite)

	select {
	case <-w.ready:
		assert.True(t, w.granted)
	default:
		t.Fatal("the waiter was left waiting with a seat free")
	}
}

// A throttled request's answer comes back at once, while the requests the
// server was running when it refused it are still unanswered: they are
// the closest bound on the server's seats.
func TestThrottleCutsToTheRequestsSentBeforeItStillInFlight(t *testing.T) {
	now := time.Unix(0, 0)
	s := &seats{ctl: newControl(Concurrency{Adaptive: true}, now), clock: clocktesting.NewFakeClock(now)}
	s.ctl.limit = 8
	sent := sendSeats(t, s, now, 6)
	sent[0].free(outcomeGood) // answered before: not running any more
	sent[1].free(outcomeGood)
	sent[4].free(outcomeThrottled)

	assert.Equal(t, 2, s.ctl.seats(), "sent before it and unanswered: 2, fewer than 5 seats in use × 3/4")
	assert.Equal(t, []uint64{sent[2].seq, sent[3].seq, sent[5].seq}, s.sentSeqs, "the finished sends are forgotten")
}

// halves is a store.SeatSharer of two processes, this one first.
type halves struct{}

func (halves) SeatShare(_ string, limit int) (int, int)          { return max((limit+1)/2, 1), 2 }
func (halves) ShareCut(string, store.SeatCut)                    {}
func (halves) ShareWait(string) time.Duration                    { return 0 }
func (halves) OnCut(string, func(store.SeatCut))                 {}
func (halves) ReportSeats(string, func() (limit int, inUse int)) {}

// Once the processes sharing a limit agree on it, the others' requests in
// flight are their shares; a throttle then cuts to the requests the server
// was running: this process's sent before it and still unanswered, and the
// others' shares.
func TestSharedThrottleCutsToTheRequestsRunningOnceTheProcessesAgree(t *testing.T) {
	now := time.Unix(0, 0)
	s := &seats{ctl: newControl(Concurrency{Adaptive: true}, now), clock: clocktesting.NewFakeClock(now), shared: halves{}}
	s.ctl.limit = 6 // this process's share: 3

	st, ok := s.tryTake(now, ClassWrite)
	require.True(t, ok)
	st.send()
	assert.Equal(t, 1+3, st.peers, "before they agree: the others may hold as many as they believe the limit to be")
	st.free(outcomeGood)

	s.adopt(store.SeatCut{Limit: 5, Ceiling: 5, ProbeAfter: minProbeEvery}, now) // share 3, the other 2
	sent := sendSeats(t, s, now, 3)
	assert.Equal(t, 3+2, sent[2].peers, "agreed: this process's 3 and the other's share")
	sent[0].free(outcomeGood)
	sent[1].free(outcomeGood)
	sent[2].free(outcomeThrottled)
	assert.Equal(t, 2, s.ctl.seats(), "none of this process's sent before it unanswered, and the other's 2: fewer than 5 × 3/4")
	assert.Equal(t, 2, int(s.ctl.ceiling))
}

// Before the processes agree on a limit, each has grown its own, and its
// guess of the others' requests in flight tells nothing: a throttle cuts
// to this process's requests alone, below the server's seats at worst,
// which quick probes mend a second after the cooldown, rather than above
// them, which costs every process another Retry-After.
func TestSharedThrottleBeforeTheProcessesAgreeCutsToItsOwnRequests(t *testing.T) {
	now := time.Unix(0, 0)
	s := &seats{ctl: newControl(Concurrency{Adaptive: true}, now), clock: clocktesting.NewFakeClock(now), shared: halves{}}
	s.ctl.limit = 6 // this process's share: 3, the other's 3
	sent := sendSeats(t, s, now, 3)
	sent[0].free(outcomeGood)
	sent[1].free(outcomeGood)
	sent[2].free(outcomeThrottled)
	assert.Equal(t, 2, s.ctl.seats(), "3 of this process's in flight, × 3/4; not 3, with the other's share of 3 counted running")
	assert.Equal(t, 2, int(s.ctl.ceiling))
}

// sendSeats takes n seats of s, each free, and sends their requests.
func sendSeats(t *testing.T, s *seats, now time.Time, n int) []seat {
	t.Helper()
	var sent []seat
	for range n {
		st, ok := s.tryTake(now, ClassWrite)
		require.True(t, ok)
		st.send()
		sent = append(sent, st)
	}
	return sent
}

// Requests that took a seat before a cut and waited for their slot
// holding it, through the cooldown the throttle started, leave when it
// ends at the limit after the cut, not the one before: those over it give
// their seats back and wait first in line for the next.
func TestSeatHoldersOverALimitCutSinceWaitForRoom(t *testing.T) {
	now := time.Unix(0, 0)
	s := &seats{ctl: newControl(Concurrency{Adaptive: true}, now), clock: clocktesting.NewFakeClock(now)}
	s.ctl.limit = 6
	sent := sendSeats(t, s, now, 2)
	var holders []seat // waiting for their slot, unsent
	for range 4 {
		st, ok := s.tryTake(now, ClassWrite)
		require.True(t, ok)
		holders = append(holders, st)
	}
	queued, _ := s.enqueue(now, ClassWrite) // a request that found no seat

	sent[1].free(outcomeThrottled)
	require.Equal(t, 1, s.ctl.seats(), "cut to the request running when the server refused")
	sent[0].free(outcomeGood)

	require.True(t, holders[0].trySend(), "nothing in flight: the first to go goes")
	for _, h := range holders[1:] {
		assert.False(t, h.trySend(), "the limit is in flight")
	}
	w, _ := s.requeue(holders[1], now)
	holders[0].free(outcomeGood)
	for _, h := range holders[2:] {
		h.free(outcomeUnsent) // cancelled meanwhile
	}
	select {
	case <-w.ready:
	default:
		t.Fatal("the seat holder put back in line is not served first")
	}
	select {
	case <-queued.ready:
		t.Fatal("the request that queued for a seat went before the one put back")
	default:
	}
	assert.True(t, w.seat.trySend())
	assert.Equal(t, 1, len(s.sentSeqs))
}

// counting is a store.SeatSharer that has not counted the processes
// sharing the limit until its share is set.
type counting struct{ share, processes atomic.Int64 }

func (c *counting) SeatShare(string, int) (int, int) {
	return int(c.share.Load()), int(c.processes.Load())
}
func (*counting) ShareCut(string, store.SeatCut)                    {}
func (*counting) ShareWait(string) time.Duration                    { return 0 }
func (*counting) OnCut(string, func(store.SeatCut))                 {}
func (*counting) ReportSeats(string, func() (limit int, inUse int)) {}

// Until the store has counted the processes sharing a limit, another may
// hold all of it: a process whose requests reserve their slots first
// (which counts them) takes no seat, one whose requests take a seat
// first takes one, for the request that counts them. While the share is
// 0, waiters look again every shareRecheck: no seat of this process's is
// held, and no free would grant them one.
func TestNoSeatUntilTheProcessesSharingTheLimitAreCounted(t *testing.T) {
	now := time.Unix(0, 0)
	clk := clocktesting.NewFakeClock(now)
	sh := &counting{}
	s := &seats{ctl: newControl(Concurrency{Fixed: 4}, now), clock: clk, shared: sh, slotFirst: true}
	_, ok := s.tryTake(now, ClassWrite)
	require.False(t, ok, "no seat before the processes are counted")
	w, _ := s.enqueue(now, ClassWrite)

	sh.share.Store(2)
	sh.processes.Store(2)
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "a recheck is due")
	clk.Step(shareRecheck)
	select {
	case <-w.ready:
		assert.True(t, w.granted, "granted at the recheck once the share has grown")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was left waiting with its share free")
	}

	seatFirst := &seats{ctl: newControl(Concurrency{Fixed: 4}, now), clock: clk, shared: &counting{}}
	_, ok = seatFirst.tryTake(now, ClassWrite)
	assert.True(t, ok, "one seat, for the request whose slot counts the processes")
	_, ok = seatFirst.tryTake(now, ClassWrite)
	assert.False(t, ok, "only one")
}
