package limiter

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/k8sratelimit/k8sratelimit/internal/ctxopt"
)

// Class is the traffic class of a counted request. Inside one budget,
// when requests wait, the classes share its rate slots and seats by
// weight (see Weights): the reconciler's writes are not queued behind a
// relist or an event storm. Leases are no class: they are exempt.
type Class uint8

const (
	// ClassWrite: POST, PUT, PATCH and DELETE, events aside.
	ClassWrite Class = iota
	// ClassRead: a GET of one object (or of discovery).
	ClassRead
	// ClassList: a list or a watch, the bulk reads.
	ClassList
	// ClassEvent: a write of core/v1 or events.k8s.io events. Events give
	// way first: one that would wait longer than EventMaxWait, or through
	// a cooldown, is refused at once.
	ClassEvent

	// NumClasses is the number of classes.
	NumClasses = 4
)

// EventMaxWait is the longest an event waits for its slot; one that
// would wait longer is refused at once (client-go's event recorder then
// drops it or tries again later), rather than queued in front of work.
const EventMaxWait = time.Second

// String returns the class's name as metrics, logs, errors and
// KUBERNETES_RATELIMIT_CLASSES write it.
func (c Class) String() string {
	switch c {
	case ClassWrite:
		return "write"
	case ClassRead:
		return "read"
	case ClassList:
		return "list"
	case ClassEvent:
		return "event"
	}
	return "unknown"
}

// Weights are the shares of the classes, indexed by Class, when their
// requests wait together: a class with weight 4 is given four slots (and
// seats) for each one a class of weight 1 is given, while both wait; a
// class with none waiting lends its share to the others. Every weight is
// at least 1, so that no class starves.
type Weights [NumClasses]int

// DefaultWeights are the weights of the classes unless configured: the
// writes that move the cluster first, then the reads of reconciles, then
// lists and watches, then events.
var DefaultWeights = Weights{ClassWrite: 8, ClassRead: 4, ClassList: 2, ClassEvent: 1}

// WithClass returns a context whose requests are of class c, whatever
// their method and path.
func WithClass(ctx context.Context, c Class) context.Context {
	return ctxopt.WithClass(ctx, uint8(c))
}

// contextClass returns the class WithClass set on ctx, if any.
func contextClass(ctx context.Context) (Class, bool) {
	c, ok := ctxopt.Class(ctx)
	return Class(c), ok && c < NumClasses
}

// classFromContext returns the class set on ctx, or def.
func classFromContext(ctx context.Context, def Class) Class {
	if c, ok := contextClass(ctx); ok {
		return c
	}
	return def
}

// classOf returns the class of req: the one its context sets, else the
// one its method and path make it.
func classOf(req *http.Request) Class {
	if c, ok := contextClass(req.Context()); ok {
		return c
	}
	var r apiPath
	if req.URL != nil {
		r = parseAPIPath(req.URL.Path)
	}
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		if r.resource == "events" && (r.group == "" || r.group == "events.k8s.io") {
			return ClassEvent
		}
		return ClassWrite
	}
	if r.watch || (r.resource != "" && !r.named) {
		return ClassList
	}
	return ClassRead
}

// apiPath is what a path says of the resource it is for.
type apiPath struct {
	group, resource string // empty when the path is not of a resource
	named           bool   // an object is named
	watch           bool   // the legacy /watch/ form
}

// parseAPIPath reads a path to a resource of the API server:
// [prefix]/api/<version>/... or [prefix]/apis/<group>/<version>/...,
// then [watch/][namespaces/<namespace>/]<resource>[/<name>[/<subresource>]].
// Other paths (discovery, /version, /openapi) have no resource. It reads
// the path once, without allocating.
func parseAPIPath(path string) (r apiPath) {
	var rest string
	switch {
	case strings.HasPrefix(path, "/api/"): // the common cases, without a prefix
		rest = path[len("/api/"):]
	case strings.HasPrefix(path, "/apis/"):
		r.group, rest = nextSegment(path[len("/apis/"):])
	default:
		seg, after := nextSegment(path)
		for seg != "api" && seg != "apis" {
			if after == "" {
				return apiPath{}
			}
			seg, after = nextSegment(after)
		}
		rest = after
		if seg == "apis" {
			r.group, rest = nextSegment(rest)
		}
	}
	_, rest = nextSegment(rest) // the version
	if r.resource, rest = nextSegment(rest); r.resource == "watch" {
		r.watch = true
		r.resource, rest = nextSegment(rest)
	}
	if r.resource != "namespaces" {
		name, _ := nextSegment(rest)
		r.named = name != ""
		return r
	}
	ns, rest := nextSegment(rest)
	if ns == "" {
		return r // the namespaces
	}
	sub, rest := nextSegment(rest)
	if sub == "" || ((sub == "status" || sub == "finalize") && rest == "") {
		r.named = true // the namespace itself
		return r
	}
	r.resource = sub
	name, _ := nextSegment(rest)
	r.named = name != ""
	return r
}

// nextSegment splits off the first non-empty segment of p.
func nextSegment(p string) (seg, rest string) {
	for len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}
