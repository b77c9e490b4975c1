package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The lag follows a link that is slow on every call, not a busy moment.
func TestRoundTripsLagIsTheLeastOfTheLatest(t *testing.T) {
	var r roundTrips
	assert.Zero(t, r.lag(), "no call yet")
	for range lagCalls {
		r.note(300 * time.Microsecond)
	}
	assert.Zero(t, r.lag(), "a healthy link adds nothing")
	r.note(80 * time.Millisecond)
	assert.Zero(t, r.lag(), "one slow call is a busy moment")
	for range lagCalls {
		r.note(100 * time.Millisecond)
	}
	r.note(120 * time.Millisecond)
	assert.EqualValues(t, 100_000, r.lag(), "a slow link: the least of its latest round trips, µs")
	r.note(time.Millisecond)
	assert.Zero(t, r.lag(), "fast again")
}
