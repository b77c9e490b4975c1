package errors_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

func ExampleRateLimitExceededError() {
	// A client call failed because its slot was too far away.
	var err error = fmt.Errorf("list pods: %w", &rlerrors.RateLimitExceededError{
		Cluster: "prod",
		Key:     "k8s:default:api.prod.example.com",
		Wait:    1500 * time.Millisecond,
		MaxWait: time.Second,
	})

	// Code that handles an API server's 429 handles it too.
	fmt.Println(apierrors.IsTooManyRequests(err))

	var rle *rlerrors.RateLimitExceededError
	if errors.As(err, &rle) {
		fmt.Println(rle.Cluster, rle.RetryAfter(), rle.RetryAfterSeconds())
	}
	// Output:
	// true
	// prod 1.5s 2
}

func ExampleHasRetryAfter() {
	// An HTTP handler passes the wait on to its own caller.
	handle := func(w http.ResponseWriter, err error) {
		var ra rlerrors.HasRetryAfter
		if errors.As(err, &ra) {
			secs := int(math.Ceil(ra.RetryAfter().Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}

	rec := httptest.NewRecorder()
	handle(rec, &rlerrors.RateLimitExceededError{Cluster: "prod", Wait: 2100 * time.Millisecond})
	fmt.Println(rec.Code, rec.Header().Get("Retry-After"))
	// Output: 429 3
}
