package probe

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Headers by which API Priority and Fairness tells how it classified a
// request.
const (
	flowSchemaHeader    = "X-Kubernetes-PF-FlowSchema-UID"
	priorityLevelHeader = "X-Kubernetes-PF-PriorityLevel-UID"
)

// Exchange is one request that left the client, and its answer.
type Exchange struct {
	Sent     time.Time // when the request was handed to the transport below
	Answered time.Time // when the response headers (or the error) came back
	// Finished is when the response body was read to its end or closed
	// (Answered when the round trip failed or had no body); zero before.
	Finished time.Time
	Method   string
	Path     string
	Query    string // the raw query, without "?"
	Watch    bool   // a watch: ?watch=true or ?watch=1
	Status   int    // 0 when the round trip failed
	// RetryAfter is the Retry-After header as given, "" when absent.
	RetryAfter    string
	FlowSchema    string // X-Kubernetes-PF-FlowSchema-UID
	PriorityLevel string // X-Kubernetes-PF-PriorityLevel-UID
}

// RetryAfterSeconds returns the Retry-After header as delta-seconds, and
// whether it was one.
func (e Exchange) RetryAfterSeconds() (int, bool) {
	n, err := strconv.Atoi(e.RetryAfter)
	return n, err == nil
}

// Wire records every request that passes through it on its way to the
// server. Placed below the limiter (added to a rest.Config with Wrap
// before the limiter is), it sees what actually leaves: one entry per
// request sent, retries included. It is safe for concurrent use.
type Wire struct {
	mu        sync.Mutex
	exchanges []Exchange
}

// Wrap returns next wrapped so that Wire sees its requests. Its signature
// fits rest.Config.Wrap.
func (w *Wire) Wrap(next http.RoundTripper) http.RoundTripper {
	return &wireTransport{wire: w, next: next}
}

// Exchanges returns a copy of what was recorded, in the order the requests
// were sent. A request still in flight has a zero Answered.
func (w *Wire) Exchanges() []Exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.exchanges)
}

// Len returns the number of requests recorded.
func (w *Wire) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.exchanges)
}

// send records a request as it leaves and returns its index.
func (w *Wire) send(e Exchange) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.exchanges = append(w.exchanges, e)
	return len(w.exchanges) - 1
}

// answer records the answer to the request at index i: resp, or none when
// the round trip failed.
func (w *Wire) answer(i int, resp *http.Response) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	e := &w.exchanges[i]
	e.Answered = now
	if resp != nil {
		e.Status = resp.StatusCode
		e.RetryAfter = resp.Header.Get("Retry-After")
		e.FlowSchema = resp.Header.Get(flowSchemaHeader)
		e.PriorityLevel = resp.Header.Get(priorityLevelHeader)
	}
}

// wireTransport is the http.RoundTripper of a Wire.
type wireTransport struct {
	wire *Wire
	next http.RoundTripper
}

var _ utilnet.RoundTripperWrapper = (*wireTransport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *wireTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	i := t.wire.send(Exchange{
		Sent:   time.Now(),
		Method: req.Method,
		Path:   req.URL.Path,
		Query:  req.URL.RawQuery,
		Watch:  q.Get("watch") == "true" || q.Get("watch") == "1",
	})
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		resp = nil
	}
	t.wire.answer(i, resp)
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		t.wire.finish(i)
		return resp, err
	}
	resp.Body = &wireBody{ReadCloser: resp.Body, wire: t.wire, i: i}
	return resp, err
}

// finish records that the exchange at index i is over.
func (w *Wire) finish(i int) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := &w.exchanges[i]; e.Finished.IsZero() {
		e.Finished = now
	}
}

// wireBody records when its exchange's body is read to its end or closed.
type wireBody struct {
	io.ReadCloser
	wire *Wire
	i    int
}

func (b *wireBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.wire.finish(b.i)
	}
	return n, err
}

func (b *wireBody) Close() error {
	err := b.ReadCloser.Close()
	b.wire.finish(b.i)
	return err
}

// WrappedRoundTripper returns the transport requests are passed on to.
func (t *wireTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// InFlightAt returns how many of exchanges were in flight when the one at
// index i was sent, itself included: sent no later, and neither finished
// nor answered without a body by then.
func InFlightAt(exchanges []Exchange, i int) int {
	at := exchanges[i].Sent
	n := 0
	for _, e := range exchanges {
		if e.Sent.After(at) {
			continue
		}
		if e.Finished.IsZero() || e.Finished.After(at) {
			n++
		}
	}
	return n
}

// Timing describes the recorded requests' times: the median time from
// sent to finished (the server's time per request, as the client sees
// it), and the median time between one request's send and the next's.
func (w *Wire) Timing() string {
	ex := w.Exchanges()
	var service, between []time.Duration
	for i, e := range ex {
		if !e.Finished.IsZero() {
			service = append(service, e.Finished.Sub(e.Sent))
		}
		if i > 0 {
			between = append(between, e.Sent.Sub(ex[i-1].Sent))
		}
	}
	return fmt.Sprintf("sent to finished p50 %s, between sends p50 %s", median(service), median(between))
}

// median returns the median of d, 0 when d is empty; it sorts d.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2].Round(10 * time.Microsecond)
}
