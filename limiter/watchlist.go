package limiter

import (
	"net/http"
	"strings"
)

// seatUse is how long a request holds its seat past its response
// headers.
type seatUse struct {
	watch     bool // a watch: its seat goes back with its response headers…
	watchList bool // …unless it asks for its initial events: then when they end
}

// useOf returns how long req holds its seat.
func useOf(req *http.Request) seatUse {
	u := seatUse{watch: isWatch(req)}
	u.watchList = u.watch && asksInitialEvents(req)
	return u
}

// asksInitialEvents reports whether a watch asks for its initial events
// (client-go's watch-list: sendInitialEvents=true), whose seat API
// Priority and Fairness holds until they end.
func asksInitialEvents(req *http.Request) bool {
	q := req.URL.RawQuery
	if !strings.Contains(q, "sendInitialEvents=") {
		return false
	}
	v := req.URL.Query()["sendInitialEvents"]
	return len(v) > 0 && strings.EqualFold(v[0], "true")
}
