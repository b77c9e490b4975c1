package limiter

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestThrottleCooldown(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	date := now.Format(http.TimeFormat)
	tests := []struct {
		name   string
		code   int
		header map[string]string
		want   time.Duration
		wantOK bool
	}{
		{"429 seconds", 429, map[string]string{"Retry-After": "5"}, 5 * time.Second, true},
		{"429 zero", 429, map[string]string{"Retry-After": "0"}, 0, true},
		{"429 padded", 429, map[string]string{"Retry-After": " 7 "}, 7 * time.Second, true},
		{"429 missing", 429, nil, time.Second, true},
		{"429 unparsable", 429, map[string]string{"Retry-After": "soon"}, time.Second, true},
		{"429 negative", 429, map[string]string{"Retry-After": "-3"}, time.Second, true},
		{"429 fraction", 429, map[string]string{"Retry-After": "1.5"}, time.Second, true},
		{"429 capped", 429, map[string]string{"Retry-After": "3600"}, 10 * time.Minute, true},
		{"429 huge", 429, map[string]string{"Retry-After": "99999999999999999999999"}, 10 * time.Minute, true},
		{"429 just past uint64", 429, map[string]string{"Retry-After": "18446744073709551616"}, 10 * time.Minute, true},
		{"429 leading zeros", 429, map[string]string{"Retry-After": "000000000000000000000000000012"}, 12 * time.Second, true},
		{"503 huge", 503, map[string]string{"Retry-After": "99999999999999999999"}, 10 * time.Minute, true},
		{"429 http-date against Date", 429, map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat), "Date": date}, 30 * time.Second, true},
		{"429 http-date in the past", 429, map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat), "Date": date}, 0, true},
		{"429 http-date capped", 429, map[string]string{"Retry-After": now.Add(time.Hour).Format(http.TimeFormat), "Date": date}, 10 * time.Minute, true},
		{"429 http-date without Date reads now", 429, map[string]string{"Retry-After": now.Add(20 * time.Second).Format(http.TimeFormat)}, 20 * time.Second, true},
		{"429 http-date with a bad Date reads now", 429, map[string]string{"Retry-After": now.Add(20 * time.Second).Format(http.TimeFormat), "Date": "yesterday"}, 20 * time.Second, true},
		{"503 with Retry-After", 503, map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{"503 without Retry-After", 503, nil, 0, false},
		{"503 unparsable", 503, map[string]string{"Retry-After": "x"}, 0, false},
		{"200", 200, map[string]string{"Retry-After": "5"}, 0, false},
		{"500", 500, map[string]string{"Retry-After": "5"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.code, Header: http.Header{}}
			for k, v := range tt.header {
				resp.Header.Set(k, v)
			}
			got, ok := throttleCooldown(resp, now)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"5", "0", "", "Mon, 30 Nov 2026 12:00:30 GMT", "-1", "1e3", "99999999999999999999"} {
		f.Add(s, "Mon, 30 Nov 2026 12:00:00 GMT")
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, date string) {
		h := http.Header{"Retry-After": {retryAfter}, "Date": {date}}
		for _, code := range []int{429, 503} {
			d, ok := throttleCooldown(&http.Response{StatusCode: code, Header: h}, now)
			if !ok {
				if code == 429 {
					t.Fatalf("a 429 always asks for a cooldown")
				}
				continue
			}
			if d < 0 || d > maxCooldown {
				t.Fatalf("cooldown %v out of 0 … %v for Retry-After %q, Date %q", d, maxCooldown, retryAfter, date)
			}
			if want, digits := deltaSeconds(retryAfter); digits && d != want {
				t.Fatalf("Retry-After %q: cooldown %v, want %v", retryAfter, d, want)
			}
		}
	})
}

// deltaSeconds returns the cooldown a delta-seconds Retry-After v asks
// for, computed digit by digit so that no value overflows, and false
// when v is not delta-seconds.
func deltaSeconds(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	var secs time.Duration
	for _, c := range v {
		secs = secs*10 + time.Duration(c-'0')
		if secs > maxCooldown/time.Second {
			return maxCooldown, true
		}
	}
	return secs * time.Second, true
}
