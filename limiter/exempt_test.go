package limiter

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func req(path string, header map[string]string) *http.Request {
	r := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: "api.example.com", Path: path}, Header: http.Header{}}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	return r
}

func TestIsStreaming(t *testing.T) {
	tests := []struct {
		path   string
		header map[string]string
		want   bool
	}{
		{"/api/v1/namespaces/ns/pods/p/exec", nil, true},
		{"/api/v1/namespaces/ns/pods/p/attach", nil, true},
		{"/api/v1/namespaces/ns/pods/p/portforward", nil, true},
		{"/k8s/clusters/c-abc/api/v1/namespaces/ns/pods/p/exec", nil, true},
		{"/api/v1/namespaces/ns/pods/p/exec/", nil, true},
		{"/api/v1/namespaces/ns/pods/p", map[string]string{"Upgrade": "SPDY/3.1"}, true},
		{"/api/v1/namespaces/ns/pods/p", map[string]string{"X-Stream-Protocol-Version": "v4.channel.k8s.io"}, true},
		{"/api/v1/namespaces/ns/pods/p", map[string]string{"Sec-WebSocket-Protocol": "v5.channel.k8s.io"}, true},
		{"/api/v1/namespaces/ns/pods/p", map[string]string{"Upgrade": "websocket"}, true},
		{"/api/v1/namespaces/ns/pods/p/log", nil, false},
		{"/api/v1/namespaces/ns/pods", nil, false},
		{"/api/v1/namespaces/ns/services/exec", nil, false},
		{"/api/v1/namespaces/ns/pods/exec", nil, false},
		{"/api/v1/nodes/n/proxy/exec", nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, isStreaming(req(tt.path, tt.header)), "%s %v", tt.path, tt.header)
	}
	// Set straight into the map, as gorilla/websocket does.
	r := req("/api/v1/namespaces/ns/pods/p", nil)
	r.Header["Sec-WebSocket-Protocol"] = []string{"v5.channel.k8s.io"}
	assert.True(t, isStreaming(r))
}

func TestIsLease(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/my-controller", true},
		{"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", true},
		{"/apis/coordination.k8s.io/v1/leases", true},
		{"/apis/coordination.k8s.io/v1beta1/namespaces/ns/leases/x", true},
		{"/apis/coordination.k8s.io/v1/watch/namespaces/ns/leases", true},
		{"/k8s/clusters/c-abc/apis/coordination.k8s.io/v1/namespaces/ns/leases/x", true},
		{"/apis/coordination.k8s.io/v1alpha2/namespaces/ns/leasecandidates/x", false},
		{"/apis/coordination.k8s.io/v1", false},
		{"/apis/coordination.k8s.io", false},
		{"/apis/example.com/v1/namespaces/ns/leases/x", false},
		{"/api/v1/namespaces/leases/pods", false},
		{"/apis/apps/v1/namespaces/coordination.k8s.io/deployments/leases", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, isLease(req(tt.path, nil)), tt.path)
	}
}

func TestIsProxy(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/api/v1/namespaces/ns/pods/p/proxy", true},
		{"/api/v1/namespaces/ns/pods/p/proxy/metrics", true},
		{"/api/v1/namespaces/ns/services/s:http/proxy/", true},
		{"/api/v1/nodes/n/proxy/stats/summary", true},
		{"/api/v1/proxy/namespaces/ns/pods/p", true},
		{"/k8s/clusters/c/api/v1/namespaces/ns/pods/p/proxy", true},
		{"/api/v1/namespaces/ns/pods/proxy", false},
		{"/api/v1/namespaces/ns/configmaps/proxy", false},
		{"/api/v1/namespaces/ns/pods", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, isProxy(req(tt.path, nil)), tt.path)
	}
}

func FuzzClassifyPath(f *testing.F) {
	for _, p := range []string{"/api/v1/namespaces/ns/pods/p/exec", "/apis/coordination.k8s.io/v1/leases", "/api/v1/proxy/x", "", "/", "//pods//exec"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r := req(p, nil)
		isStreaming(r)
		isLease(r)
		isProxy(r)
		// Whatever comes before, a pod's exec, attach or portforward is
		// streaming, and a namespaced lease is a lease.
		prefix := strings.TrimRight(p, "/")
		for _, sub := range []string{"exec", "attach", "portforward"} {
			if !isStreaming(req(prefix+"/pods/p/"+sub, nil)) {
				t.Fatalf("%s/pods/p/%s is not streaming", prefix, sub)
			}
		}
		if !isLease(req(prefix+"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", nil)) {
			t.Fatalf("a lease under %q is not a lease", prefix)
		}
	})
}
