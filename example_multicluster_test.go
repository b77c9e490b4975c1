package k8sratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/internal/apisim"
)

// A program that talks to two clusters, named by their kubeconfig
// contexts: each has its own budget, and errors, logs and metrics name the
// cluster.
func Example_multiCluster() {
	prod, staging := apisim.New(), apisim.New()
	defer prod.Close()
	defer staging.Close()
	kubeconfig := writeTwoContextKubeconfig(prod.URL, staging.URL)
	defer os.RemoveAll(filepath.Dir(kubeconfig))

	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit = 1 // per minute, per cluster
	never := 0 * cfg.Timespan
	cfg.MaxWait = &never
	l, err := k8sratelimit.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	clients := map[string]kubernetes.Interface{}
	for _, name := range []string{"prod", "staging"} {
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: name},
		).ClientConfig()
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := l.ConfigureCluster(name, rc); err != nil {
			fmt.Println(err)
			return
		}
		clients[name] = kubernetes.NewForConfigOrDie(rc)
	}

	ctx := context.Background()
	for _, name := range []string{"prod", "staging", "prod"} {
		_, err := clients[name].CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		var rle *rlerrors.RateLimitExceededError
		if errors.As(err, &rle) {
			fmt.Printf("%s: over budget, retry in %ds\n", rle.Cluster, rle.RetryAfterSeconds())
			continue
		}
		fmt.Printf("%s: %v\n", name, err)
	}
	// Output:
	// prod: <nil>
	// staging: <nil>
	// prod: over budget, retry in 60s
}

func writeTwoContextKubeconfig(prodURL, stagingURL string) string {
	dir, err := os.MkdirTemp("", "kubeconfig")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "config")
	content := `apiVersion: v1
kind: Config
clusters:
- {name: prod, cluster: {server: "` + prodURL + `"}}
- {name: staging, cluster: {server: "` + stagingURL + `"}}
users:
- {name: me, user: {token: "t"}}
contexts:
- {name: prod, context: {cluster: prod, user: me}}
- {name: staging, context: {cluster: staging, user: me}}
current-context: prod
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		panic(err)
	}
	return path
}

// An HTTP handler that calls the API server passes a client-side refusal
// on to its own caller as 429 with Retry-After.
func Example_httpHandler() {
	apiserver := apisim.New()
	defer apiserver.Close()

	cfg := k8sratelimit.DefaultConfig()
	cfg.Limit = 1
	never := 0 * cfg.Timespan
	cfg.MaxWait = &never
	l, _ := k8sratelimit.New(cfg)
	defer l.Close()
	rc := &rest.Config{Host: apiserver.URL}
	_ = l.Configure(rc)
	cs := kubernetes.NewForConfigOrDie(rc)

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pods, err := cs.CoreV1().Pods("default").List(r.Context(), metav1.ListOptions{})
		var rle *rlerrors.RateLimitExceededError
		switch {
		case errors.As(err, &rle):
			w.Header().Set("Retry-After", strconv.Itoa(rle.RetryAfterSeconds()))
			http.Error(w, "busy, try again later", http.StatusTooManyRequests)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
		default:
			fmt.Fprintf(w, "%d pods\n", len(pods.Items))
		}
	})

	for range 2 {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pods", nil))
		fmt.Printf("%d Retry-After=%q\n", rec.Code, rec.Header().Get("Retry-After"))
	}
	// Output:
	// 200 Retry-After=""
	// 429 Retry-After="60"
}
