package decided_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/decided"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Millisecond))) }

func span(from, to float64) decided.Span { return decided.Span{From: ms(from), To: ms(to)} }

func TestTightest(t *testing.T) {
	tests := []struct {
		name  string
		spans []decided.Span
		n     int
		want  time.Duration
	}{
		{"one decision", []decided.Span{span(0, 2)}, 1, 2 * time.Millisecond},
		{"exact spans", []decided.Span{span(0, 0), span(100, 100), span(200, 200)}, 2, 100 * time.Millisecond},
		{"the widths count against proving", []decided.Span{span(0, 1), span(99, 100), span(200, 201)}, 2, 100 * time.Millisecond},
		// A wide span between two narrow ones must not hide them: in
		// order of From, the narrow ones are not neighbours.
		{"a wide span in between", []decided.Span{span(0, 1), span(0.5, 500), span(2, 3)}, 2, 3 * time.Millisecond},
		{"a group out of order of From", []decided.Span{span(0, 300), span(10, 11), span(20, 21), span(30, 31)}, 3, 21 * time.Millisecond},
		{"all in one instant", []decided.Span{span(5, 5), span(5, 5), span(5, 5)}, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := decided.Tightest(tt.spans, tt.n)
			require.True(t, ok)
			assert.Equal(t, tt.want, got.Within)
			assert.Len(t, got.Spans, tt.n)
		})
	}
}

func TestTightestTooFew(t *testing.T) {
	_, ok := decided.Tightest([]decided.Span{span(0, 1)}, 2)
	assert.False(t, ok)
}

// Tightest agrees with trying every group, on random spans.
func TestTightestIsTheLeastOfAllGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		spans := make([]decided.Span, 2+r.IntN(7))
		for i := range spans {
			from := r.Float64() * 100
			spans[i] = span(from, from+r.ExpFloat64()*10)
		}
		n := 1 + r.IntN(len(spans))
		got, ok := decided.Tightest(spans, n)
		require.True(t, ok)
		want := time.Duration(-1)
		for mask := range 1 << len(spans) {
			var group []decided.Span
			for i, s := range spans {
				if mask&(1<<i) != 0 {
					group = append(group, s)
				}
			}
			if len(group) == n {
				if w := within(group); want < 0 || w < want {
					want = w
				}
			}
		}
		require.Equal(t, want, got.Within, "%v, n %d", spans, n)
		assert.Equal(t, got.Within, within(got.Spans), "the group returned is the one measured")
	}
}

func within(group []decided.Span) time.Duration {
	from, to := group[0].From, group[0].To
	for _, s := range group {
		if s.From.Before(from) {
			from = s.From
		}
		if s.To.After(to) {
			to = s.To
		}
	}
	return to.Sub(from)
}

// A limiter that lets a request too many go shows as a group of limit+1
// within less than a timespan, by the distance it was off less the widths.
func TestTightestCatchesARequestTooMany(t *testing.T) {
	const limit, timespan = 3, 100 * time.Millisecond
	var correct, early []decided.Span
	for i := range 12 {
		// Three requests each timespan, decided within a millisecond.
		at := float64(i/limit)*100 + float64(i%limit)
		correct = append(correct, span(at, at+1))
		// Four requests each timespan: evenly spaced, a third over.
		at = float64(i) * 25
		early = append(early, span(at, at+1))
	}
	c, ok := decided.Tightest(correct, limit+1)
	require.True(t, ok)
	assert.GreaterOrEqual(t, c.Within, timespan, c.String())
	c, ok = decided.Tightest(early, limit+1)
	require.True(t, ok)
	assert.Less(t, c.Within, timespan, c.String())
}
