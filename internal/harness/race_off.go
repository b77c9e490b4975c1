//go:build !race

package harness

// Race reports that the tests run under the race detector.
const Race = false
