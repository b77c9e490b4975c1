package k8sratelimit_test

// The link tests: processes sharing one budget through a real
// redis-server, one of them through a proxy (redistest.Proxy) that drops
// its link to Redis on and off, checked on the instants requests reached
// the API server.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/internal/redistest"
)

// linkChildren starts two chaos children on one budget with failure
// policy failure, "near" on Redis directly and "far" through a proxy, and
// waits until both send. It returns the proxy and the children.
func linkChildren(t *testing.T, api *apisim.Server, failure string, nearWorkers, farWorkers int) (*redistest.Proxy, []*chaosChild) {
	t.Helper()
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	near := startChaosChild(t, "near", api.URL, srv.URL(), failure, nearWorkers)
	far := startChaosChild(t, "far", api.URL, proxy.URL(), failure, farWorkers)
	children := []*chaosChild{near, far}
	for _, c := range children {
		require.Eventually(t, func() bool { return sentBy(api, c.Name) > 0 }, 30*time.Second, 10*time.Millisecond,
			"child %s sends", c.Name)
	}
	return proxy, children
}

// TestRedisFlappingLinkAtTheWire: one process's link to Redis drops for
// 1.5s and comes back for 1.5s, again and again, with failure policy
// local. No request fails because of the store, each process stays
// within the limit on its own, and the two within twice the limit while
// they cannot share.
func TestRedisFlappingLinkAtTheWire(t *testing.T) {
	api := apisim.New()
	t.Cleanup(api.Close)
	api.SetCapacity(64, 0, 20*time.Millisecond)
	proxy, children := linkChildren(t, api, "local", 10, 10)
	hold(time.Second)
	for range 3 {
		proxy.Drop()
		hold(1500 * time.Millisecond)
		proxy.Restore()
		hold(1500 * time.Millisecond)
	}
	for _, c := range children {
		c.stop(t)
	}
	nothingLeft(t, children...)
	for _, c := range children {
		failed := 0
		for _, r := range c.requests {
			if r.failed {
				failed++
				if failed <= 3 {
					t.Errorf("child %s: a request failed: %s", c.Name, r.err)
				}
			}
		}
		assert.Zero(t, failed, "child %s: requests failed, with failure policy local", c.Name)
		wireWithin(t, "at the server, child "+c.Name+"'s requests", arrivalsOf(api, c.Name), chaosLimit)
	}
	assert.NotEmpty(t, children[1].events, "the far child saw its link drop")
	wireWithin(t, "at the server, both children", arrivalsOf(api, "near", "far"), 2*chaosLimit)
}

// TestRedisSlowLinkAtTheWire: one process's replies from Redis come
// 100ms late, and nothing else goes wrong: no outage, so the two
// processes share one exact budget, also at the server, where the slow
// one's requests arrive a reply's delay after Redis decided them.
func TestRedisSlowLinkAtTheWire(t *testing.T) {
	api := apisim.New()
	t.Cleanup(api.Close)
	api.SetCapacity(64, 0, 20*time.Millisecond)
	proxy, children := linkChildren(t, api, "local", 10, 10)
	hold(time.Second)
	proxy.SetDelay(100 * time.Millisecond)
	hold(8 * time.Second)
	for _, c := range children {
		c.stop(t)
	}
	nothingLeft(t, children...)
	for _, c := range children {
		assert.Empty(t, c.events, "child %s: no outage", c.Name)
	}
	wireWithin(t, "at the server, both children", arrivalsOf(api, "near", "far"), chaosLimit)
}
