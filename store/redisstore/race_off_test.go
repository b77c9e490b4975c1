//go:build !race

package redisstore_test

// raceDetector reports that the tests run under the race detector.
const raceDetector = false
