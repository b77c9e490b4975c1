//go:build !race

package store_test

// raceDetector reports that the tests run under the race detector.
const raceDetector = false
