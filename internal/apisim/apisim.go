// Package apisim is an in-process stand-in for a Kubernetes API server,
// for tests and the demo: an httptest server that answers discovery,
// /version, pods (and writes of them), namespaces, leases, event writes
// and watches the way an API server does, records every request it
// receives, and can be told to throttle like API Priority and Fairness
// (429 with Retry-After).
package apisim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
)

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	At     time.Time
}

// ThrottleFunc decides, before a request is served, whether to answer it
// with a throttling status instead; it returns the status (0: serve it) and
// the headers to set.
type ThrottleFunc func(r *http.Request) (status int, header http.Header)

// Server is a simulated API server. It is safe for concurrent use.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	requests []Request
	rejected int // answers 429 or 503, by the throttle or by capacity
	throttle ThrottleFunc
	capacity *capacity
	inFlight map[string]int // requests being served, by path
	most     map[string]int // the most ever served at once, by path
	stop     chan struct{}
	stopOnce sync.Once
}

// capacity is a simulation of API Priority and Fairness for one priority
// level: seats requests can run at once, each for service; up to queue
// more wait for a seat; the rest are rejected with 429 and Retry-After.
type capacity struct {
	seats   chan struct{}
	queue   int
	queued  int // guarded by Server.mu
	service time.Duration
}

// New starts a simulated API server on a loopback port. Close it when done.
func New() *Server {
	s := &Server{stop: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close ends the open watches and stops the server.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.Server.Close()
}

// SetCapacity makes the server enforce its own capacity the way API
// Priority and Fairness does: seats requests are served at once, each
// taking service; up to queue more wait for a seat; any other request is
// rejected with 429 and "Retry-After: 1", as an APF priority level with
// limitResponse Queue does. Watches hold no seat. seats 0 removes the
// limit. Call it before the server receives requests.
func (s *Server) SetCapacity(seats, queue int, service time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seats <= 0 {
		s.capacity = nil
		return
	}
	s.capacity = &capacity{seats: make(chan struct{}, seats), queue: queue, service: service}
}

// Rejected returns the number of requests answered with 429 or 503 so far.
func (s *Server) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// MaxInWindow returns the largest number of requests the server received
// within any rolling window of span.
func (s *Server) MaxInWindow(span time.Duration) int {
	reqs := s.Requests()
	at := make([]time.Time, len(reqs))
	for i, r := range reqs {
		at[i] = r.At
	}
	return MostInWindow(at, span)
}

// MostInWindow returns the largest number of the instants at, in
// ascending order, that lie within any rolling window of span.
func MostInWindow(at []time.Time, span time.Duration) int {
	best, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= span {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// SetThrottle installs f (nil: none).
func (s *Server) SetThrottle(f ThrottleFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = f
}

// Requests returns the requests received so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count returns the number of requests received whose path contains part.
func (s *Server) Count(part string) int {
	n := 0
	for _, r := range s.Requests() {
		if strings.Contains(r.Path, part) {
			n++
		}
	}
	return n
}

// Reset forgets the requests received so far.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// MostInFlight returns the most requests for path the server was serving
// at once, from their arrival until their answer was written.
func (s *Server) MostInFlight(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most[path]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), At: time.Now()})
	throttle, c := s.throttle, s.capacity
	if s.inFlight == nil {
		s.inFlight, s.most = map[string]int{}, map[string]int{}
	}
	s.inFlight[r.URL.Path]++
	s.most[r.URL.Path] = max(s.most[r.URL.Path], s.inFlight[r.URL.Path])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight[r.URL.Path]--
		s.mu.Unlock()
	}()

	if throttle != nil {
		if status, header := throttle(r); status != 0 {
			for k, vs := range header {
				w.Header()[k] = vs
			}
			s.reject(w, status)
			return
		}
	}
	if c != nil && r.URL.Query().Get("watch") != "true" {
		if !s.takeSeat(r, c) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("X-Kubernetes-PF-PriorityLevel-UID", "apisim-workload-low")
			w.Header().Set("X-Kubernetes-PF-FlowSchema-UID", "apisim-service-accounts")
			s.reject(w, http.StatusTooManyRequests)
			return
		}
		defer func() { <-c.seats }()
		select { // the work the request costs the server
		case <-time.After(c.service):
		case <-r.Context().Done():
			return
		}
	}
	s.route(w, r)
}

// takeSeat takes a seat, queueing for one when the queue has room, and
// reports whether it got one.
func (s *Server) takeSeat(r *http.Request, c *capacity) bool {
	select {
	case c.seats <- struct{}{}:
		return true
	default:
	}
	s.mu.Lock()
	if c.queued >= c.queue {
		s.mu.Unlock()
		return false
	}
	c.queued++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		c.queued--
		s.mu.Unlock()
	}()
	select {
	case c.seats <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	case <-s.stop:
		return false
	}
}

func (s *Server) reject(w http.ResponseWriter, status int) {
	s.mu.Lock()
	s.rejected++
	s.mu.Unlock()
	writeStatus(w, status, metav1.StatusReasonTooManyRequests, "too many requests, please try again later")
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	segs := strings.FieldsFunc(r.URL.Path, func(c rune) bool { return c == '/' })
	switch {
	case r.URL.Path == "/version":
		writeJSON(w, http.StatusOK, version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2-apisim"})
	case r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/livez":
		w.Write([]byte("ok"))
	case r.URL.Path == "/api":
		writeJSON(w, http.StatusOK, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	case r.URL.Path == "/apis":
		writeJSON(w, http.StatusOK, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}})
	case len(segs) >= 5 && segs[0] == "api" && segs[2] == "namespaces" && segs[4] == "pods":
		s.pods(w, r, segs)
	case len(segs) == 5 && segs[0] == "api" && segs[2] == "namespaces" && segs[4] == "events" && r.Method == http.MethodPost:
		writeJSON(w, http.StatusCreated, &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "event", Namespace: segs[3], ResourceVersion: "1"}})
	case len(segs) == 3 && segs[0] == "api" && segs[2] == "namespaces":
		s.list(w, r, &corev1.NamespaceList{TypeMeta: metav1.TypeMeta{Kind: "NamespaceList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "1"},
			Items:    []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "default", ResourceVersion: "1"}}}})
	case len(segs) >= 7 && segs[1] == "coordination.k8s.io" && segs[5] == "leases":
		lease := coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: segs[6], Namespace: segs[4], ResourceVersion: "1"}}
		writeJSON(w, http.StatusOK, &lease)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	}
}

// pods serves /api/v1/namespaces/<ns>/pods[/<name>[/<subresource>]]:
// lists and watches, gets, and writes, which it answers with the pod.
func (s *Server) pods(w http.ResponseWriter, r *http.Request, segs []string) {
	ns := segs[3]
	switch {
	case len(segs) <= 6 && r.Method != http.MethodGet:
		// A write: the pod as the client sent it, or as deleted.
		status := http.StatusOK
		if r.Method == http.MethodPost {
			status = http.StatusCreated
		}
		name := "demo"
		if len(segs) == 6 {
			name = segs[5]
		}
		writeJSON(w, status, &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "2"}})
	case len(segs) == 5:
		pod := corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns, ResourceVersion: "1"}}
		s.list(w, r, &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.Pod{pod}})
	case len(segs) == 6:
		writeJSON(w, http.StatusOK, &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: segs[5], Namespace: ns, ResourceVersion: "1"}})
	default:
		// exec, attach, portforward, log, proxy: no node runs the pod.
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("pod %s/%s has no node to %s", ns, segs[5], segs[6]))
	}
}

// list answers a list, or a watch when ?watch=true: the list's items as
// ADDED events, then nothing until the client or the server goes away.
func (s *Server) list(w http.ResponseWriter, r *http.Request, list runtime.Object) {
	if r.URL.Query().Get("watch") != "true" {
		writeJSON(w, http.StatusOK, list)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	items := watchItems(list)
	for _, obj := range items {
		raw, _ := json.Marshal(obj)
		_ = enc.Encode(metav1.WatchEvent{Type: "ADDED", Object: runtime.RawExtension{Raw: raw}})
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	select {
	case <-r.Context().Done():
	case <-s.stop:
	}
}

func watchItems(list runtime.Object) []any {
	var out []any
	switch l := list.(type) {
	case *corev1.PodList:
		for i := range l.Items {
			p := l.Items[i]
			p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
			out = append(out, &p)
		}
	case *corev1.NamespaceList:
		for i := range l.Items {
			n := l.Items[i]
			n.TypeMeta = metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}
			out = append(out, &n)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
}
