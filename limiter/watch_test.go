package limiter_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/k8sratelimit/k8sratelimit/internal/ctxopt"
	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// streamServer answers every request for /api/v1/pods with its
// headers at once and then keeps the stream open until the test ends;
// anything else gets a short body.
func streamServer(t *testing.T) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/pods" {
			_, _ = io.WriteString(w, "{}")
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

// A query the API server reads as a watch (apimachinery's boolean
// conversion of the watch parameter: anything but 0 or false, any case)
// frees its seat when the response headers arrive, while the stream is
// still open: the next request goes at once on a budget of one seat.
func TestWatchAsTheServerReadsItFreesItsSeatAtItsHeaders(t *testing.T) {
	for _, query := range []string{"watch=True", "watch=TRUE", "watch=yes", "watch=", "watch", "w%61tch=1", "watch=%74rue", "watch=1&watch=0"} {
		t.Run(query, func(t *testing.T) {
			srv := streamServer(t)
			b, _ := setup(t, window(10000, time.Second), limiter.Options{Concurrency: limiter.Concurrency{Fixed: 1}})
			client := &http.Client{Transport: b.Wrap(srv.Client().Transport)}

			resp, err := client.Get(srv.URL + "/api/v1/pods?" + query)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Zero(t, b.Seats().InUse, "the watch goes on without a seat")

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctxopt.WithMaxWait(ctx, 0), http.MethodGet, srv.URL+"/api/v1/namespaces", nil)
			second, err := client.Do(req)
			require.NoError(t, err, "the next request finds the seat free")
			_, _ = io.Copy(io.Discard, second.Body)
			second.Body.Close()
		})
	}
}

// A query the API server does not read as a watch holds its seat while
// its body is open, as any other request.
func TestNotAWatchHoldsItsSeatUntilItsBodyEnds(t *testing.T) {
	for _, query := range []string{"watch=false", "watch=FALSE", "watch=0", "watch=0&watch=1", "watchx=1"} {
		t.Run(query, func(t *testing.T) {
			srv := streamServer(t)
			b, _ := setup(t, window(10000, time.Second), limiter.Options{Concurrency: limiter.Concurrency{Fixed: 1}})
			client := &http.Client{Transport: b.Wrap(srv.Client().Transport)}

			resp, err := client.Get(srv.URL + "/api/v1/pods?" + query)
			require.NoError(t, err)
			assert.Equal(t, 1, b.Seats().InUse, "the open body holds the seat")
			resp.Body.Close()
			assert.Zero(t, b.Seats().InUse)
		})
	}
}
