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

// isWatch reports whether req opens a watch: watch=true (or 1) in the
// query, which also marks client-go's streaming list, or the legacy
// /watch/ path.
func isWatch(req *http.Request) bool {
	if req.URL == nil {
		return false
	}
	for q := req.URL.RawQuery; q != ""; {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if v, ok := strings.CutPrefix(kv, "watch="); ok {
			return v == "true" || v == "1"
		}
	}
	return strings.Contains(req.URL.Path, "/watch/")
}
