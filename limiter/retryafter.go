package limiter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// maxCooldown caps a cooldown, whatever Retry-After says.
	maxCooldown = 10 * time.Minute
	// defaultCooldown is the cooldown of a 429 without a usable Retry-After.
	defaultCooldown = time.Second
)

// throttleCooldown returns the cooldown a response asks for: a 429, or a
// 503 with Retry-After. Retry-After is delta-seconds or an HTTP-date, read
// against the response's Date header when there is one (else now). A 429
// without a usable Retry-After asks for defaultCooldown. The cooldown is
// capped at maxCooldown. ok is false for any other response.
func throttleCooldown(resp *http.Response, now time.Time) (d time.Duration, ok bool) {
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
	default:
		return 0, false
	}
	d, parsed := parseRetryAfter(resp.Header, now)
	if !parsed {
		if resp.StatusCode != http.StatusTooManyRequests {
			return 0, false
		}
		d = defaultCooldown
	}
	return min(d, maxCooldown), true
}

// parseRetryAfter reads a Retry-After header: delta-seconds, or an
// HTTP-date relative to the Date header (else now). A date in the past is
// 0; delta-seconds too large for any integer are maxCooldown, as every
// value above it.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if allDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(maxCooldown/time.Second) {
			return maxCooldown, true // too large to parse is very long
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return max(at.Sub(now), 0), true
}

// allDigits reports whether s is one or more ASCII digits, the syntax of
// delta-seconds.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
