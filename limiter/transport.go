package limiter

import (
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Transport is the http.RoundTripper that makes every request through it
// count against a budget, and follows the server's throttling answers.
//
// Exempt requests pass at once and consume nothing: exec, attach and
// portforward (streaming connections), coordination.k8s.io leases (leader
// election), requests made with k8sratelimit.WithoutLimit, and those matched by the
// Engine's extra exemptions. A watch counts once, when it is opened.
//
// With a concurrency limit (Options.Concurrency), a counted request also
// holds a seat from its send until its response is finished: its body read
// to EOF or closed, or the round trip failed. A watch holds one until its
// response headers arrive, as the API server frees a watch's seat once it
// has started, and a watch that asks for its initial events (client-go's
// watch-list) until the bookmark that ends them, as the API server holds
// it; pods/log and the proxy subresources, which the API server runs
// outside API Priority and Fairness, hold none. A response body the
// caller never closes keeps its seat, as it keeps its connection.
//
// With Adaptive on, a 429, or a 503 with Retry-After, that is not the
// response of a proxy subresource cools the whole budget down for as long
// as Retry-After says, whichever request it answers (an exempt one too:
// the server is throttling this client all the same). The response is passed back unchanged, so that
// client-go's own retry still works (and its retries count).
//
// Transport never answers a request itself and never modifies it: it
// either passes it on or fails it with an error, closing its body.
type Transport struct {
	budget *Budget
	next   http.RoundTripper
}

var _ utilnet.RoundTripperWrapper = (*Transport)(nil)

// Wrap returns next wrapped in a Transport for the budget b. A nil next is
// http.DefaultTransport.
func (b *Budget) Wrap(next http.RoundTripper) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{budget: b, next: next}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	b := t.budget
	var st seat
	if b.l.isExempt(req) {
		b.l.observer.Exempt(b.Cluster(), b.key)
	} else {
		var err error
		if st, err = b.admit(req.Context(), nil, b.seats != nil && holdsSeat(req), classOf(req)); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		st.free(outcomeFailed)
		return nil, err
	}
	// Also for an exempt request: the server throttles this client all
	// the same.
	o := outcomeGood
	if t.observe(req, resp) {
		o = outcomeThrottled
	}
	return st.holdUntilDone(req, resp, o), nil
}

// observe starts a cooldown when resp is a server's throttling answer, and
// reports whether it was one (a proxied backend's answer never is).
func (t *Transport) observe(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return false // the common case, decided without reading the clock
	}
	b := t.budget
	l := b.l
	d, ok := throttleCooldown(resp, l.clock.Now())
	if !ok {
		return false
	}
	if isProxy(req) {
		l.observer.Throttled(b.Cluster(), b.key, resp.StatusCode, 0)
		return false
	}
	if !l.adaptive {
		l.observer.Throttled(b.Cluster(), b.key, resp.StatusCode, 0)
		return true
	}
	if _, err := b.SetCooldown(req.Context(), d); err != nil {
		l.log.Error(err, "starting a cooldown", "cluster", b.Cluster(), "budget", b.key)
	}
	l.observer.Throttled(b.Cluster(), b.key, resp.StatusCode, d)
	return true
}

// WrappedRoundTripper returns the transport requests are passed on to, so
// that client-go's debugging helpers can see through it.
func (t *Transport) WrappedRoundTripper() http.RoundTripper { return t.next }

// Budget returns the budget the transport counts against.
func (t *Transport) Budget() *Budget { return t.budget }
