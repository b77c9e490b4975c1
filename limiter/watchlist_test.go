package limiter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// watchServer answers watches of ConfigMaps; a watch-list sends the
// bookmark ending its initial events once it receives from endInitial.
type watchServer struct {
	*httptest.Server
	endInitial chan struct{}
}

// configMaps returns the ConfigMaps of the initial events: 7 of 50 KB,
// so that they take several reads.
func configMaps() []corev1.ConfigMap {
	cms := make([]corev1.ConfigMap, 7)
	for i := range cms {
		cms[i] = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "ns", ResourceVersion: "1"},
			Data:       map[string]string{"pad": strings.Repeat("x", 50_000)},
		}
	}
	return cms
}

func newWatchServer(t *testing.T) *watchServer {
	s := &watchServer{endInitial: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		s.watchList(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// watchList streams the initial events, and the bookmark that ends them
// once it receives from endInitial.
func (s *watchServer) watchList(w http.ResponseWriter, r *http.Request) {
	enc := json.NewEncoder(w)
	for _, cm := range configMaps() {
		_ = enc.Encode(metav1.WatchEvent{Type: string(watch.Added), Object: objectJSON(&cm)})
	}
	w.(http.Flusher).Flush()
	select {
	case <-s.endInitial:
	case <-r.Context().Done():
		return
	}
	end := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	_ = enc.Encode(metav1.WatchEvent{Type: string(watch.Bookmark), Object: objectJSON(&end)})
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func objectJSON(cm *corev1.ConfigMap) runtime.RawExtension {
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	b, _ := json.Marshal(cm)
	return runtime.RawExtension{Raw: b}
}

// watchClient returns a clientset through a budget of 20 seats on the
// server, and the budget.
func watchClient(t *testing.T, srv *watchServer) (kubernetes.Interface, *limiter.Budget) {
	b, _ := setup(t, window(10000, time.Second), limiter.Options{Concurrency: limiter.Concurrency{Fixed: 20}})
	rc := &rest.Config{Host: srv.URL, QPS: -1}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return b.Wrap(rt) })
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs, b
}

func TestWatchListHoldsItsSeatUntilItsInitialEventsEnd(t *testing.T) {
	srv := newWatchServer(t)
	cs, b := watchClient(t, srv)
	opts := metav1.ListOptions{Watch: true, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}

	w, err := cs.CoreV1().ConfigMaps("ns").Watch(context.Background(), opts)
	require.NoError(t, err)
	defer w.Stop()
	require.Equal(t, watch.Added, (<-w.ResultChan()).Type)
	assert.Equal(t, 1, b.Seats().InUse, "the initial events hold the watch's seat")

	srv.endInitial <- struct{}{}
	for e := range w.ResultChan() {
		if e.Type == watch.Bookmark {
			break
		}
	}
	assert.Zero(t, b.Seats().InUse, "the seat goes back when the initial events end")
}

func TestPlainWatchFreesItsSeatWithItsHeaders(t *testing.T) {
	srv := newWatchServer(t)
	cs, b := watchClient(t, srv)
	w, err := cs.CoreV1().ConfigMaps("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	require.NoError(t, err)
	defer w.Stop()
	assert.Zero(t, b.Seats().InUse)
}
