package limiter

import (
	"net/http"
	"strings"
)

// isStreaming reports whether req opens a streaming connection to a pod —
// exec, attach or portforward — by its path or by a streaming protocol
// header, in both the SPDY and the WebSocket forms.
func isStreaming(req *http.Request) bool {
	// Look the keys up as they are stored, without canonicalising (no
	// allocation): the canonical forms, and the one WebSocket dialers such
	// as gorilla/websocket set directly.
	h := req.Header
	if len(h["Upgrade"]) > 0 || len(h["X-Stream-Protocol-Version"]) > 0 ||
		len(h["Sec-Websocket-Protocol"]) > 0 || len(h["Sec-WebSocket-Protocol"]) > 0 {
		return true
	}
	if req.URL == nil {
		return false
	}
	// .../pods/<name>/<subresource>[/]
	p := strings.TrimRight(req.URL.Path, "/")
	p, sub := cutLast(p)
	switch sub {
	case "exec", "attach", "portforward":
	default:
		return false
	}
	p, _ = cutLast(p)
	_, resource := cutLast(p)
	return resource == "pods"
}

// cutLast splits p at its last "/" into what comes before and the last
// segment.
func cutLast(p string) (before, last string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// isLease reports whether req is for coordination.k8s.io leases, any verb
// and version: leader election never waits.
func isLease(req *http.Request) bool {
	if req.URL == nil || !strings.Contains(req.URL.Path, "/coordination.k8s.io/") {
		return false
	}
	segs := pathSegments(req.URL.Path)
	for i := 0; i+2 < len(segs); i++ {
		if segs[i] != "apis" || segs[i+1] != "coordination.k8s.io" {
			continue
		}
		rest := segs[i+3:] // after the version
		if len(rest) > 0 && rest[0] == "watch" {
			rest = rest[1:]
		}
		if len(rest) >= 2 && rest[0] == "namespaces" {
			rest = rest[2:]
		}
		if len(rest) > 0 && rest[0] == "leases" {
			return true
		}
	}
	return false
}

// isProxy reports whether req is for the proxy subresource of a pod,
// service or node, whose responses carry a backend's status rather than the
// API server's.
func isProxy(req *http.Request) bool {
	if req.URL == nil || !strings.Contains(req.URL.Path, "/proxy") {
		return false // the common case, decided without allocating
	}
	segs := pathSegments(req.URL.Path)
	for i := 2; i < len(segs); i++ {
		if segs[i] != "proxy" {
			continue
		}
		switch segs[i-2] {
		case "pods", "services", "nodes":
			return true
		}
	}
	// The deprecated /api/v1/proxy/... form.
	return len(segs) >= 3 && segs[0] == "api" && segs[2] == "proxy"
}

// pathSegments splits a path into its non-empty segments. Only the
// segments up to the API group matter, so a path prefix before /api or
// /apis is harmless.
func pathSegments(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}
