package limiter

import (
	"net/http"
	"strings"
)

// How API Priority and Fairness charges a list (SizeBasedListCostEstimate,
// on by default since Kubernetes 1.34): a seat per listBytesPerSeat bytes
// of response, capped per request at maxSeatsPerRequest and at a share of
// the level (levelShare of its seats, rounded up).
const (
	listBytesPerSeat   = 100_000
	maxSeatsPerRequest = 10
	levelShare         = 0.15
)

// seatUse is what a request does with the seats of its budget.
type seatUse struct {
	weight    int    // the seats it takes; 0: none
	kind      string // a list's kind (see listKind), whose cost it teaches; "" for other requests
	watch     bool   // a watch: its seats go back with its response headers…
	watchList bool   // …unless it asks for initial events: then when they end
}

// costs are the seats that lists of each kind weighed when last answered,
// learned from the size of their responses. Requests of other kinds weigh
// one seat. The seats' lock guards them.
type costs struct {
	off    bool // every request weighs one seat
	byKind map[string]int
}

func newCosts(off bool) costs { return costs{off: off, byKind: map[string]int{}} }

// use returns what req does with the seats of budget s.
func (s *seats) use(req *http.Request) seatUse {
	u := seatUse{weight: 1, watch: isWatch(req)}
	if req.Method != http.MethodGet || req.URL == nil {
		return u
	}
	if u.watch {
		if u.watchList = asksInitialEvents(req); !u.watchList {
			return u
		}
	}
	if s.costs.off {
		return u
	}
	if u.kind = listKind(req.URL.Path, u.watchList); u.kind == "" {
		return u
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u.weight = min(max(s.costs.byKind[u.kind], 1), maxWeight(s.ctl.seats()))
	return u
}

// learn records that a list of kind answered with n bytes.
func (s *seats) learn(kind string, n int64) {
	w := int((n + listBytesPerSeat - 1) / listBytesPerSeat)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.costs.byKind[kind] = max(w, 1)
}

// maxWeight is the most a request may weigh on a level of limit seats,
// as APF caps it: levelShare of the seats, rounded up, at least one and
// at most maxSeatsPerRequest.
func maxWeight(limit int) int {
	share := int(float64(limit)*levelShare + 0.999999)
	return min(max(share, 1), maxSeatsPerRequest)
}

// asksInitialEvents reports whether a watch asks for the initial events
// (client-go's watch-list: sendInitialEvents=true), which API Priority and
// Fairness charges like a list until they end.
func asksInitialEvents(req *http.Request) bool {
	q := req.URL.RawQuery
	if !strings.Contains(q, "sendInitialEvents=") {
		return false
	}
	v := req.URL.Query()["sendInitialEvents"]
	return len(v) > 0 && strings.EqualFold(v[0], "true")
}

// listKind returns the kind of a list, or of a watch-list, of the
// collection at path: its group, version and resource, whether it spans
// namespaces or one, and which of the two it is. It returns "" when path
// names one object or is no resource path.
func listKind(path string, watchList bool) string {
	p := strings.Trim(path, "/")
	var gv string
	switch {
	case strings.HasPrefix(p, "api/"):
		gv, p = cutN(p[len("api/"):], 1)
	case strings.HasPrefix(p, "apis/"):
		gv, p = cutN(p[len("apis/"):], 2)
	default:
		return ""
	}
	p = strings.TrimPrefix(p, "watch/")
	scope := "cluster"
	if ns, rest, ok := strings.Cut(p, "/"); ok && ns == "namespaces" {
		_, rest, ok = strings.Cut(rest, "/")
		if !ok {
			return "" // one namespace
		}
		p, scope = rest, "namespace"
	}
	if p == "" || strings.Contains(p, "/") {
		return "" // one object, or one of its subresources
	}
	verb := "list"
	if watchList {
		verb = "watchlist"
	}
	return verb + " " + gv + "/" + p + " " + scope
}

// cutN splits p after its first n segments.
func cutN(p string, n int) (head, rest string) {
	i := 0
	for range n {
		j := strings.IndexByte(p[i:], '/')
		if j < 0 {
			return p, ""
		}
		i += j + 1
	}
	return p[:i-1], p[i:]
}
