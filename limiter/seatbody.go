package limiter

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// holdUntilDone arranges for the seat to be given back when resp is
// finished: at once for a watch (the server frees its seat once the watch
// has started), a protocol switch or an empty body, else when the body is
// read to its end or closed. The zero seat leaves resp as it is.
func (st seat) holdUntilDone(resp *http.Response, watch bool, o outcome) *http.Response {
	if st.s == nil {
		return resp
	}
	if watch || resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		st.free(o)
		return resp
	}
	resp.Body = &seatBody{rc: resp.Body, seat: st, outcome: o}
	return resp
}

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
