// Package decided checks a rolling window against decisions timed on a
// real clock, for tests.
//
// A limiter decides to let a request go at one instant, inside a call (a
// store's Reserve or Confirm, a Budget's Wait). A test cannot read that
// instant; it can read the clock before the call and after it returns, and
// knows only that the decision lies in between: a Span. A window of limit
// requests per timespan is then proven broken only when limit+1 decisions
// lie within less than a timespan wherever in their spans they were made,
// that is when the latest end of their spans comes less than a timespan
// after the earliest start. Tightest finds the group that comes closest;
// a test asserts that even it needs a full timespan. The check's own
// tolerance is the width of the spans, which is the measurement's, not a
// margin granted to the limiter: scheduling delays between the decision
// and the send do not enter it.
package decided

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Span is when a request was let go: at some instant from From to To, the
// start of the call that decided it and its return.
type Span struct{ From, To time.Time }

// Width is the uncertainty of the decision's instant.
func (s Span) Width() time.Duration { return s.To.Sub(s.From) }

// Recorder collects Spans. The zero Recorder is empty and ready to use; it
// is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	spans []Span
}

// Add records a decision made between from and to.
func (r *Recorder) Add(from, to time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, Span{from, to})
}

// Spans returns the decisions recorded so far, sorted by From.
func (r *Recorder) Spans() []Span {
	r.mu.Lock()
	spans := slices.Clone(r.spans)
	r.mu.Unlock()
	Sort(spans)
	return spans
}

// Len returns the number of decisions recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}

// Sort sorts spans by From, then To.
func Sort(spans []Span) {
	slices.SortFunc(spans, func(a, b Span) int {
		if c := a.From.Compare(b.From); c != 0 {
			return c
		}
		return a.To.Compare(b.To)
	})
}

// Crowd is a group of decisions and how close together they surely are.
type Crowd struct {
	// Within is the longest time the group's decisions can be apart: from
	// the earliest From to the latest To. Whatever instants in their spans
	// they were made at, all of them lie within it.
	Within time.Duration
	// Spans are the group's decisions, sorted by From.
	Spans []Span
}

// Widest returns the width of the group's widest span: how much of Within
// is the measurement's uncertainty rather than the decisions' distance.
func (c Crowd) Widest() time.Duration {
	var w time.Duration
	for _, s := range c.Spans {
		w = max(w, s.Width())
	}
	return w
}

// String lists the group's spans from the earliest From, in milliseconds.
func (c Crowd) String() string {
	if len(c.Spans) == 0 {
		return "no decisions"
	}
	t0 := c.Spans[0].From
	ms := func(t time.Time) float64 { return float64(t.Sub(t0)) / float64(time.Millisecond) }
	parts := make([]string, len(c.Spans))
	for i, s := range c.Spans {
		parts[i] = fmt.Sprintf("%.3f-%.3f", ms(s.From), ms(s.To))
	}
	return fmt.Sprintf("%d decisions surely within %v (ms from %s: %s)",
		len(c.Spans), c.Within, t0.Format("15:04:05.000000"), strings.Join(parts, ", "))
}

// Tightest returns the n decisions of spans that are surely the closest
// together: the group whose Within is the least. ok is false when spans
// holds fewer than n decisions. A window of n-1 requests per timespan
// holds on the decisions when Within is at least the timespan; when it is
// less, the window surely let n requests go within one timespan.
func Tightest(spans []Span, n int) (c Crowd, ok bool) {
	if n < 1 || len(spans) < n {
		return Crowd{}, false
	}
	sorted := slices.Clone(spans)
	Sort(sorted)
	// For each decision i as the group's earliest start, the rest of the
	// best group are the n-1 decisions starting no earlier whose ends come
	// first. Walking i backwards, keep those ends in a max-heap.
	var later endHeap
	best, bestAt := time.Duration(-1), -1
	for i := len(sorted) - 1; i >= 0; i-- {
		if later.Len() == n-1 {
			end := sorted[i].To
			if n > 1 && later.top().To.After(end) {
				end = later.top().To
			}
			if w := end.Sub(sorted[i].From); best < 0 || w <= best {
				best, bestAt = w, i
			}
		}
		if n > 1 {
			heap.Push(&later, sorted[i])
			if later.Len() > n-1 {
				heap.Pop(&later)
			}
		}
	}
	// Rebuild the best group: decision bestAt and the n-1 decisions after
	// it in sorted order whose ends come first.
	rest := slices.Clone(sorted[bestAt+1:])
	slices.SortStableFunc(rest, func(a, b Span) int { return a.To.Compare(b.To) })
	group := append([]Span{sorted[bestAt]}, rest[:n-1]...)
	Sort(group)
	return Crowd{Within: best, Spans: group}, true
}

// endHeap is a max-heap of spans by To.
type endHeap []Span

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].To.After(h[j].To) }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(Span)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
func (h endHeap) top() Span { return h[0] }
