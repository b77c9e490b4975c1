package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
	"github.com/k8sratelimit/k8sratelimit/limiter"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

func Example() {
	srv := apisim.New()
	defer srv.Close()

	// Two requests per minute per API server, never waiting more than 1s.
	maxWait := time.Second
	l := limiter.New(memorystore.New(nil), limiter.Options{
		Policy:   store.Policy{Strategy: store.StrategyWindow, Limit: 2, Timespan: time.Minute},
		MaxWait:  &maxWait,
		Adaptive: true,
	})
	defer l.Close()

	client := &http.Client{Transport: l.Budget("k8s:default:apisim", "sim").Wrap(nil)}
	for i := range 3 {
		resp, err := client.Get(srv.URL + "/version")
		var rle *rlerrors.RateLimitExceededError
		switch {
		case errors.As(err, &rle):
			fmt.Printf("request %d: refused, retry after %ds\n", i, rle.RetryAfterSeconds())
		case err != nil:
			fmt.Println(err)
		default:
			resp.Body.Close()
			fmt.Printf("request %d: %s\n", i, resp.Status)
		}
	}
	// Output:
	// request 0: 200 OK
	// request 1: 200 OK
	// request 2: refused, retry after 60s
}

func ExampleBudget_Wait() {
	l := limiter.New(memorystore.New(nil), limiter.Options{
		Policy: store.Policy{Strategy: store.StrategyLinear, Limit: 100, Timespan: time.Second},
	})
	defer l.Close()
	b := l.Budget("k8s:default:api.example.com", "prod")

	// Admission webhooks must answer quickly: cap the wait per request.
	ctx := k8sratelimit.WithMaxWait(context.Background(), 50*time.Millisecond)
	fmt.Println(b.Wait(ctx))
	// Output: <nil>
}
