package fake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/fake"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
)

// countPods is the code under test: it configures its client with the
// process default limiter, as production code does.
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

func Example() {
	srv := apisim.New() // in a real test: your own httptest API server
	defer srv.Close()

	f := fake.New()
	defer f.Install()()

	n, err := countPods(context.Background(), srv.URL)
	fmt.Println(n, err, f.Requests(f.Key(&rest.Config{Host: srv.URL})))

	// Script a refusal to test how the code handles it, without waiting.
	f.RejectNext(1, 5*time.Second)
	_, err = countPods(context.Background(), srv.URL)
	var rle *rlerrors.RateLimitExceededError
	if errors.As(err, &rle) {
		fmt.Println("retry after", rle.RetryAfter())
	}
	// Output:
	// 1 <nil> 1
	// retry after 5s
}
