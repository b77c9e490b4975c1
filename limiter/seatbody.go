package limiter

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// holdUntilDone arranges for the seat of req to be given back when its
// response resp is finished: at once for a watch (the server frees its
// seat once the watch has started), a protocol switch or an empty body;
// for a watch that asked for its initial events and got them, when the
// bookmark that ends them arrives; else when the body is read to its end
// or closed. The zero seat leaves resp as it is.
func (st seat) holdUntilDone(req *http.Request, resp *http.Response, o outcome) *http.Response {
	if st.s == nil {
		return resp
	}
	watch := isWatch(req)
	watchList := watch && resp.StatusCode == http.StatusOK && asksInitialEvents(req)
	if watch && !watchList || resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		st.free(o)
		return resp
	}
	if watchList {
		resp.Body = &watchListBody{seatBody: seatBody{rc: resp.Body, seat: st, outcome: o}}
	} else {
		resp.Body = &seatBody{rc: resp.Body, seat: st, outcome: o}
	}
	return resp
}

// initialEventsEnd is the annotation of the bookmark that ends a
// watch-list's initial events, the same bytes in JSON and in protobuf.
const initialEventsEnd = "k8s.io/initial-events-end"

var initialEventsEndBytes = []byte(initialEventsEnd)

// seatBody is a response body that gives back its request's seat when it
// is read to its end (or fails) or closed, whichever comes first.
type seatBody struct {
	rc      io.ReadCloser
	seat    seat
	outcome outcome
	done    atomic.Bool
}

func (sb *seatBody) Read(p []byte) (int, error) {
	n, err := sb.rc.Read(p)
	if err != nil {
		sb.finish()
	}
	return n, err
}

// watchListBody is the body of a watch-list: it gives back the seat also
// when the initial events end. Past that, reads pass through untouched.
type watchListBody struct {
	seatBody
	tail  [len(initialEventsEnd) - 1]byte // the last bytes read, for a mark across reads
	tailN int                             // how many of tail hold them
}

func (wb *watchListBody) Read(p []byte) (int, error) {
	n, err := wb.rc.Read(p)
	if !wb.done.Load() && (err != nil || wb.marked(p[:n])) {
		wb.finish()
	}
	return n, err
}

// marked reports whether the initial events end in p, or across the end
// of what was read before and p.
func (wb *watchListBody) marked(p []byte) bool {
	if bytes.Contains(p, initialEventsEndBytes) {
		return true
	}
	var buf [2 * len(wb.tail)]byte
	joined := append(append(buf[:0], wb.tail[:wb.tailN]...), p[:min(len(p), len(wb.tail))]...)
	if bytes.Contains(joined, initialEventsEndBytes) {
		return true
	}
	last := joined[max(len(joined)-len(wb.tail), 0):]
	if len(p) >= len(wb.tail) {
		last = p[len(p)-len(wb.tail):]
	}
	wb.tailN = copy(wb.tail[:], last)
	return false
}

func (sb *seatBody) Close() error {
	err := sb.rc.Close()
	sb.finish()
	return err
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

// asksInitialEvents reports whether a watch asks for its initial events
// (client-go's watch-list: sendInitialEvents=true), whose seat API
// Priority and Fairness holds until they end.
func asksInitialEvents(req *http.Request) bool {
	if !strings.Contains(req.URL.RawQuery, "sendInitialEvents=") {
		return false
	}
	v := req.URL.Query()["sendInitialEvents"]
	return len(v) > 0 && strings.EqualFold(v[0], "true")
}
