package limiter

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestListKind(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/configmaps":                   "list v1/configmaps namespace",
		"/api/v1/configmaps":                                 "list v1/configmaps cluster",
		"/api/v1/namespaces":                                 "list v1/namespaces cluster",
		"/apis/apps/v1/namespaces/ns/deployments/":           "list apps/v1/deployments namespace",
		"/apis/apps/v1/deployments":                          "list apps/v1/deployments cluster",
		"/api/v1/watch/namespaces/ns/pods":                   "list v1/pods namespace",
		"/api/v1/namespaces/ns":                              "",
		"/api/v1/namespaces/ns/configmaps/cm":                "",
		"/api/v1/namespaces/ns/pods/p/status":                "",
		"/apis/apps/v1":                                      "",
		"/api":                                               "",
		"/version":                                           "",
		"/apis/example.com/v1/namespaces/ns/widgets/w/scale": "",
	} {
		assert.Equal(t, want, listKind(path, false), path)
	}
	assert.Equal(t, "watchlist v1/pods cluster", listKind("/api/v1/pods", true))
}

func FuzzListKind(f *testing.F) {
	for _, p := range []string{"/api/v1/namespaces/ns/configmaps", "/apis/a/v1/x", "/api/v1/watch/namespaces", "//api//v1/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		k := listKind(path, false)
		if k != "" && !strings.HasPrefix(k, "list ") {
			t.Fatalf("%q: kind %q", path, k)
		}
	})
}

// The mark that ends a watch-list's initial events is found whatever
// the reads cut the stream into, and only where it is.
func FuzzSeatBodyFindsTheEndOfTheInitialEvents(f *testing.F) {
	f.Add([]byte(`{"type":"BOOKMARK","object":{"metadata":{"annotations":{"k8s.io/initial-events-end":"true"}}}}`), uint8(1))
	f.Add([]byte(`{"type":"ADDED"}k8s.io/initial-events-en`), uint8(7))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		sb := &seatBody{untilMark: true}
		r := io.Reader(bytes.NewReader(stream))
		found := false
		buf := make([]byte, max(int(chunk), 1))
		for !found {
			n, err := r.Read(buf)
			found = sb.marked(buf[:n])
			if err != nil {
				break
			}
		}
		assert.Equal(t, bytes.Contains(stream, initialEventsEnd), found)
	})
}
