//go:build race

package redisstore_test

// raceDetector reports that the tests run under the race detector, which
// slows every goroutine several times and makes wake-ups late.
const raceDetector = true
