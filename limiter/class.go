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

// classFromContext returns the class set on ctx, or def.
func classFromContext(ctx context.Context, def Class) Class {
	if c, ok := ctxopt.Class(ctx); ok && c < NumClasses {
		return Class(c)
	}
	return def
}

// classOf returns the class of req: the one its context sets, else the
// one its method and path make it.
func classOf(req *http.Request) Class {
	if c, ok := ctxopt.Class(req.Context()); ok && c < NumClasses {
		return Class(c)
	}
	path := ""
	if req.URL != nil {
		path = req.URL.Path
	}
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		if isEvents(path) {
			return ClassEvent
		}
		return ClassWrite
	}
	if strings.Contains(path, "/watch/") || isCollection(path) {
		return ClassList
	}
	return ClassRead
}

// apiResource returns the API group, resource and whether an object is
// named, of a path to a resource of the API server:
// [prefix]/api/<version>/... or [prefix]/apis/<group>/<version>/...,
// then [namespaces/<namespace>/]<resource>[/<name>[/<subresource>]]. ok is
// false for other paths (discovery, /version, /openapi).
func apiResource(path string) (group, resource string, named, ok bool) {
	var rest string
	if i := strings.Index(path, "/apis/"); i >= 0 {
		group, rest = nextSegment(path[i+len("/apis/"):])
	} else if i := strings.Index(path, "/api/"); i >= 0 {
		rest = path[i+len("/api/"):]
	} else {
		return "", "", false, false
	}
	_, rest = nextSegment(rest) // the version
	resource, rest = nextSegment(rest)
	if resource == "" {
		return "", "", false, false
	}
	if resource != "namespaces" {
		name, _ := nextSegment(rest)
		return group, resource, name != "", true
	}
	ns, rest := nextSegment(rest)
	if ns == "" {
		return group, "namespaces", false, true
	}
	sub, rest := nextSegment(rest)
	if sub == "" || ((sub == "status" || sub == "finalize") && rest == "") {
		return group, "namespaces", true, true // the namespace itself
	}
	name, _ := nextSegment(rest)
	return group, sub, name != "", true
}

// nextSegment splits off the first non-empty segment of p.
func nextSegment(p string) (seg, rest string) {
	p = strings.TrimLeft(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

// isCollection reports whether path names a collection of resources: a
// GET of it is a list (or, with watch=true, a watch).
func isCollection(path string) bool {
	_, _, named, ok := apiResource(path)
	return ok && !named
}

// isEvents reports whether path is of core/v1 or events.k8s.io events.
func isEvents(path string) bool {
	if !strings.Contains(path, "events") {
		return false // the common case, decided at once
	}
	group, resource, _, ok := apiResource(path)
	return ok && resource == "events" && (group == "" || group == "events.k8s.io")
}
