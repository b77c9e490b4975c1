package limiter

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// holdUntilDone arranges for the seats to be given back when resp is
// finished: at once for a watch (the server frees its seats once the watch
// has started), a protocol switch or an empty body; for a watch that asked
// for its initial events, when the bookmark that ends them arrives; else
// when the body is read to its end or closed. A list read to its end, and
// the initial events of a watch-list, teach the budget what requests of
// their kind weigh. The zero seat leaves resp as it is.
func (st seat) holdUntilDone(resp *http.Response, use seatUse, o outcome) *http.Response {
	if st.s == nil {
		return resp
	}
	ok := resp.StatusCode == http.StatusOK
	if use.watch && !(use.watchList && ok) || resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		st.free(o)
		return resp
	}
	sb := &seatBody{rc: resp.Body, seat: st, outcome: o}
	if ok {
		sb.kind, sb.untilMark = use.kind, use.watchList
	}
	resp.Body = sb
	return resp
}

// initialEventsEnd is the annotation of the bookmark that ends a
// watch-list's initial events, the same bytes in JSON and in protobuf.
var initialEventsEnd = []byte("k8s.io/initial-events-end")

// seatBody is a response body that gives back its request's seats when it
// is read to its end (or fails) or closed, whichever comes first, or, for
// a watch-list, when its initial events end.
type seatBody struct {
	rc        io.ReadCloser
	seat      seat
	outcome   outcome
	kind      string // a list's kind, learned from its size; "" for none
	untilMark bool   // a watch-list: its seats go back at initialEventsEnd
	n         int64  // bytes read
	tail      [24]byte
	tailN     int // the last bytes read, up to len(initialEventsEnd)-1, for a mark across reads
	done      atomic.Bool
}

func (sb *seatBody) Read(p []byte) (int, error) {
	n, err := sb.rc.Read(p)
	if sb.done.Load() {
		return n, err
	}
	sb.n += int64(n)
	switch {
	case sb.untilMark && sb.marked(p[:n]):
		sb.learnAndFinish()
	case err == io.EOF && !sb.untilMark:
		sb.learnAndFinish()
	case err != nil:
		sb.finish()
	}
	return n, err
}

// marked reports whether the initial events end in p, or across the end
// of what was read before and p.
func (sb *seatBody) marked(p []byte) bool {
	if bytes.Contains(p, initialEventsEnd) {
		return true
	}
	var buf [2 * len(sb.tail)]byte
	joined := append(append(buf[:0], sb.tail[:sb.tailN]...), p[:min(len(p), len(sb.tail))]...)
	if bytes.Contains(joined, initialEventsEnd) {
		return true
	}
	last := joined[max(len(joined)-len(sb.tail), 0):]
	if len(p) >= len(sb.tail) {
		last = p[len(p)-len(sb.tail):]
	}
	sb.tailN = copy(sb.tail[:], last)
	return false
}

func (sb *seatBody) Close() error {
	err := sb.rc.Close()
	sb.finish()
	return err
}

// learnAndFinish teaches the budget what a request of the body's kind
// weighs, then gives back the seats.
func (sb *seatBody) learnAndFinish() {
	if sb.kind != "" && !sb.done.Load() {
		sb.seat.s.learn(sb.kind, sb.n)
	}
	sb.finish()
}

func (sb *seatBody) finish() {
	if sb.done.CompareAndSwap(false, true) {
		sb.seat.free(sb.outcome)
	}
}

// holdsSeat reports whether a counted request holds a seat: all but those
// the API server runs outside API Priority and Fairness's seats, as
// long-running requests (pods/log and the proxy subresources).
func holdsSeat(req *http.Request) bool {
	return !isLog(req) && !isProxy(req)
}

// isLog reports whether req reads a pod's log.
func isLog(req *http.Request) bool {
	if req.URL == nil {
		return false
	}
	p, sub := cutLast(strings.TrimRight(req.URL.Path, "/"))
	if sub != "log" {
		return false
	}
	p, _ = cutLast(p)
	_, resource := cutLast(p)
	return resource == "pods"
}

// isWatch reports whether req opens a watch, as the API server reads it:
// the legacy /watch/ path, or a watch query parameter (which also marks
// client-go's streaming list) whose first value is anything but "0" or
// "false" in any case, an empty one included: apimachinery's
// Convert_Slice_string_To_bool on the query as net/url parses it.
func isWatch(req *http.Request) bool {
	if req.URL == nil {
		return false
	}
	if strings.Contains(req.URL.Path, "/watch/") {
		return true
	}
	if req.URL.RawQuery == "" {
		return false
	}
	v := req.URL.Query()["watch"]
	return len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
}
