package limiter_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/k8sratelimit/k8sratelimit/internal/benchref"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// benchSeatWorkers and benchSeats are the shape of the end-to-end seats
// runs: many workers over a priority level of a few seats.
const (
	benchSeatWorkers = 40
	benchSeats       = 3
)

// BenchmarkSeatHandoff is the cost of passing seats between many workers:
// benchSeatWorkers goroutines send requests that take no time through
// benchSeats seats, each waiting its turn with a deadline as a
// controller's request does. "channel" is the same with a buffered channel
// as the semaphore: the floor of any FIFO handoff between goroutines.
func BenchmarkSeatHandoff(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "https://apiserver.example:6443"+benchPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("channel", func(b *testing.B) {
		sem := make(chan struct{}, benchSeats)
		rt := benchStubTransport{}
		benchWorkers(b, func(ctx context.Context) error {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			resp, err := rt.RoundTrip(req.WithContext(ctx))
			<-sem
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
	})
	b.Run("seats", func(b *testing.B) {
		l := limiter.New(memorystore.New(nil), limiter.Options{Policy: benchPolicy, Concurrency: limiter.Concurrency{Fixed: benchSeats}})
		rt := l.Budget(benchref.Key, benchCluster).Wrap(benchStubTransport{})
		benchWorkers(b, func(ctx context.Context) error {
			resp, err := rt.RoundTrip(req.WithContext(ctx))
			if err == nil {
				resp.Body.Close()
			}
			return err
		})
	})
}

// benchWorkers runs b.N calls of do spread over benchSeatWorkers
// goroutines, each call with a context whose deadline is far away.
func benchWorkers(b *testing.B, do func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	work := make(chan struct{}, benchSeatWorkers)
	var wg sync.WaitGroup
	for range benchSeatWorkers {
		wg.Go(func() {
			for range work {
				if err := do(ctx); err != nil {
					b.Error(err)
				}
			}
		})
	}
	b.ResetTimer()
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
}
