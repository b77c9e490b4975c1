//go:build !race

package k8sratelimit_test

// raceDetector reports that the tests run under the race detector.
const raceDetector = false
