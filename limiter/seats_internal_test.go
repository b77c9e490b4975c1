package limiter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// A request that finds no seat free and then queues must not wait for a
// seat given back in between: nobody would give it one later.
func TestSeatFreedBeforeTheWaiterQueuesIsGrantedToIt(t *testing.T) {
	now := time.Unix(0, 0)
	s := &seats{ctl: newControl(Concurrency{Fixed: 1}, now), clock: clocktesting.NewFakePassiveClock(now)}
	held, ok := s.tryTake(now)
	require.True(t, ok)
	_, ok = s.tryTake(now)
	require.False(t, ok, "the only seat is held")

	held.free(outcomeUnsent) // given back before the second request queues
	w, _ := s.enqueue(now)

	select {
	case <-w.ready:
		assert.True(t, w.granted)
	default:
		t.Fatal("the waiter was left waiting with a seat free")
	}
}
