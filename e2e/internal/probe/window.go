package probe

import "time"

// MaxInWindow returns the most instants of sorted (ascending) that fall in
// any half-open window [t, t+span), and where the first such window
// starts.
func MaxInWindow(sorted []time.Time, span time.Duration) (n int, start time.Time) {
	j := 0
	for i := range sorted {
		for j < len(sorted) && sorted[j].Sub(sorted[i]) < span {
			j++
		}
		if j-i > n {
			n, start = j-i, sorted[i]
		}
	}
	return n, start
}

// ShortestSpan returns the shortest time between the first and the last of
// n consecutive instants of sorted (ascending), and false when sorted holds
// fewer than n. With n = limit+1 it tells how close the window came to
// holding more than limit.
func ShortestSpan(sorted []time.Time, n int) (time.Duration, bool) {
	if n < 1 || len(sorted) < n {
		return 0, false
	}
	shortest := sorted[n-1].Sub(sorted[0])
	for i := 1; i+n-1 < len(sorted); i++ {
		shortest = min(shortest, sorted[i+n-1].Sub(sorted[i]))
	}
	return shortest, true
}
