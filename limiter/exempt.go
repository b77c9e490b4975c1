package limiter

import (
	"net/http"
	"strings"
)

// isStreaming reports whether req opens a streaming connection to a pod —
// exec, attach or portforward — by its path or by a streaming protocol
// header, in both the SPDY and the WebSocket forms.
func isStreaming(req *http.Request) bool {
	h := req.Header
	if h.Get("Upgrade") != "" || h.Get("X-Stream-Protocol-Version") != "" || h.Get("Sec-Websocket-Protocol") != "" {
		return true
	}
	if req.URL == nil {
		return false
	}
	segs := pathSegments(req.URL.Path)
	n := len(segs)
	if n < 3 || segs[n-3] != "pods" {
		return false
	}
	switch segs[n-1] {
	case "exec", "attach", "portforward":
		return true
	}
	return false
}

// isLease reports whether req is for coordination.k8s.io leases, any verb
// and version: leader election never waits.
func isLease(req *http.Request) bool {
	if req.URL == nil {
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
		return len(rest) > 0 && rest[0] == "leases"
	}
	return false
}

// isProxy reports whether req is for the proxy subresource of a pod,
// service or node, whose responses carry a backend's status rather than the
// API server's.
func isProxy(req *http.Request) bool {
	if req.URL == nil {
		return false
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
