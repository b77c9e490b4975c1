package limiter

// SetSeatLimit sets b's concurrency limit to n seats, as if learned.
func SetSeatLimit(b *Budget, n int) {
	b.seats.mu.Lock()
	defer b.seats.mu.Unlock()
	b.seats.ctl.limit = float64(n)
}

// ClassOf is classOf, for tests.
var ClassOf = classOf
