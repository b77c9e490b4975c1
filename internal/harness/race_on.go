//go:build race

package harness

// Race reports that the tests run under the race detector, which slows
// every goroutine several times and makes wake-ups late.
const Race = true
