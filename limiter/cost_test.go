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

// listServer answers lists of ConfigMaps of 350 KB, and watch-lists of
// the same ConfigMaps, each of which sends the bookmark ending the
// initial events once it receives from endInitial.
type listServer struct {
	*httptest.Server
	endInitial chan struct{}
}

// configMaps returns 7 ConfigMaps of 50 KB each.
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

func newListServer(t *testing.T) *listServer {
	s := &listServer{endInitial: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "" {
			list := corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: configMaps()}
			_ = json.NewEncoder(w).Encode(&list)
			return
		}
		s.watchList(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// watchList streams the initial events, and the bookmark that ends them
// once it receives from endInitial.
func (s *listServer) watchList(w http.ResponseWriter, r *http.Request) {
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

// costClient returns a clientset through a budget of 20 seats (a list
// weighs at most 3) on the server, and the budget.
func costClient(t *testing.T, srv *listServer, c limiter.Concurrency) (kubernetes.Interface, *limiter.Budget) {
	b, _ := setup(t, window(10000, time.Second), limiter.Options{Concurrency: c})
	rc := &rest.Config{Host: srv.URL, QPS: -1}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return b.Wrap(rt) })
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs, b
}

// openList sends a list through the budget's transport and returns the
// response with its body unread.
func openList(t *testing.T, srv *listServer, b *limiter.Budget) *http.Response {
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/ns/configmaps", nil)
	require.NoError(t, err)
	resp, err := b.Wrap(srv.Client().Transport).RoundTrip(req)
	require.NoError(t, err)
	return resp
}

func TestListWeighsTheSeatsAPFChargesForIt(t *testing.T) {
	for _, c := range []struct {
		name string
		conc limiter.Concurrency
		want int
	}{
		{"weighted", limiter.Concurrency{Fixed: 20}, 3}, // 350 KB: 4 seats, capped at 15 % of 20
		{"one seat each", limiter.Concurrency{Fixed: 20, OneSeatEach: true}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newListServer(t)
			cs, b := costClient(t, srv, c.conc)

			first := openList(t, srv, b)
			assert.Equal(t, 1, b.Seats().InUse, "the first list of its kind weighs one seat")
			first.Body.Close()
			_, err := cs.CoreV1().ConfigMaps("ns").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Zero(t, b.Seats().InUse)

			held := openList(t, srv, b)
			assert.Equal(t, c.want, b.Seats().InUse, "a list weighs what the last of its kind did")
			held.Body.Close()
			assert.Zero(t, b.Seats().InUse)

			other, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/other/configmaps/cm-0", nil)
			require.NoError(t, err)
			resp, err := b.Wrap(srv.Client().Transport).RoundTrip(other)
			require.NoError(t, err)
			assert.Equal(t, 1, b.Seats().InUse, "a get weighs one seat")
			resp.Body.Close()
		})
	}
}

func TestWatchListHoldsItsSeatsUntilItsInitialEventsEnd(t *testing.T) {
	for _, c := range []struct {
		name   string
		conc   limiter.Concurrency
		second int
	}{
		{"weighted", limiter.Concurrency{Fixed: 20}, 3},
		{"one seat each", limiter.Concurrency{Fixed: 20, OneSeatEach: true}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newListServer(t)
			cs, b := costClient(t, srv, c.conc)
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

			again, err := cs.CoreV1().ConfigMaps("ns").Watch(context.Background(), opts)
			require.NoError(t, err)
			defer again.Stop()
			require.Equal(t, watch.Added, (<-again.ResultChan()).Type)
			assert.Equal(t, c.second, b.Seats().InUse, "a watch-list weighs what the initial events of the last of its kind did")
		})
	}
}

func TestPlainWatchFreesItsSeatWithItsHeadersWhatEverItsKind(t *testing.T) {
	srv := newListServer(t)
	cs, b := costClient(t, srv, limiter.Concurrency{Fixed: 20})
	w, err := cs.CoreV1().ConfigMaps("ns").Watch(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	require.NoError(t, err)
	defer w.Stop()
	assert.Zero(t, b.Seats().InUse)
}
