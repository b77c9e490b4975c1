package fake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/fake"
)

// countPods is the code under test: it builds its client from a
// rest.Config configured with the process default limiter, as production
// code does.
func countPods(ctx context.Context, host string) (int, error) {
	rc := &rest.Config{Host: host}
	if err := k8sratelimit.Configure(rc); err != nil {
		return 0, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return 0, err
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(pods.Items), nil
}

// The fake limiter records the requests of code that builds real clients
// (here against an httptest API server) and refuses them on cue, without
// waiting.
func Example() {
	// An API server that answers every request with an empty pod list.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
	}))
	defer srv.Close()

	f := fake.New()
	defer f.Install()() // the process default: k8sratelimit.Configure uses it

	n, err := countPods(context.Background(), srv.URL)
	fmt.Println(n, err, f.Requests(f.Key(&rest.Config{Host: srv.URL})))

	f.RejectNext(1, 5*time.Second) // or f.RejectAll(d), until f.Reset()
	_, err = countPods(context.Background(), srv.URL)
	var rle *rlerrors.RateLimitExceededError
	fmt.Println(errors.As(err, &rle), rle.RetryAfter(), f.Requests(f.Key(&rest.Config{Host: srv.URL})))
	// Output:
	// 0 <nil> 1
	// true 5s 2
}

// client-go's fake clientset has no transport, so no limiter sees its
// requests; a reactor makes it return the limiter's error instead.
func Example_fakeClientset() {
	cs := k8sfake.NewClientset()
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, &rlerrors.RateLimitExceededError{
			Cluster: "prod",
			Key:     "k8s:default:api.prod.example.com",
			Wait:    1500 * time.Millisecond,
		}
	})

	_, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	// What the code under test checks: any 429 (from the server too), or
	// the limiter's refusal and its wait exactly.
	fmt.Println(apierrors.IsTooManyRequests(err))
	var rle *rlerrors.RateLimitExceededError
	if errors.As(err, &rle) {
		fmt.Println(rle.Cluster, rle.RetryAfter(), rle.RetryAfterSeconds())
	}
	// Output:
	// true
	// prod 1.5s 2
}
