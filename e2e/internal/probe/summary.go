package probe

import (
	"net/http"
	"slices"
	"time"
)

// Summary condenses a run's exchanges into the figures the tests compare.
type Summary struct {
	Sent         int            // requests that left the client
	Throttled    int            // of them answered 429
	RetryAfters  map[string]int // the 429s' Retry-After values, counted
	FlowSchemas  map[string]int // X-Kubernetes-PF-FlowSchema-UID values seen, counted
	PriorityLvls map[string]int // X-Kubernetes-PF-PriorityLevel-UID values seen, counted
	Duration     time.Duration  // from the first send to the last answer
}

// Summarize returns the Summary of exchanges.
func Summarize(exchanges []Exchange) Summary {
	s := Summary{
		RetryAfters:  make(map[string]int),
		FlowSchemas:  make(map[string]int),
		PriorityLvls: make(map[string]int),
	}
	var first, last time.Time
	for _, e := range exchanges {
		s.Sent++
		if e.Status == http.StatusTooManyRequests {
			s.Throttled++
			s.RetryAfters[e.RetryAfter]++
		}
		if e.FlowSchema != "" {
			s.FlowSchemas[e.FlowSchema]++
		}
		if e.PriorityLevel != "" {
			s.PriorityLvls[e.PriorityLevel]++
		}
		if first.IsZero() || e.Sent.Before(first) {
			first = e.Sent
		}
		if e.Answered.After(last) {
			last = e.Answered
		}
	}
	s.Duration = last.Sub(first)
	return s
}

// SendTimes returns the instants the exchanges were sent, sorted.
func SendTimes(exchanges []Exchange) []time.Time {
	ts := make([]time.Time, len(exchanges))
	for i, e := range exchanges {
		ts[i] = e.Sent
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}
