package k8sratelimit_test

import (
	"log"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/k8sratelimit/k8sratelimit"
)

// A program that wants the limiter's logs in its own logger, and its
// metrics, on the one-line Configure path builds the limiter itself and
// installs it as the process default.
func ExampleSetDefault() {
	cfg, err := k8sratelimit.ConfigFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	logger := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil))
	l, err := k8sratelimit.New(cfg,
		k8sratelimit.WithLogger(logger),                        // default: klog, as client-go
		k8sratelimit.WithMetrics(prometheus.DefaultRegisterer)) // default: no metrics
	if err != nil {
		log.Fatal(err)
	}
	k8sratelimit.SetDefault(l) // Configure uses it from now on
	defer l.Close()

	rc := &rest.Config{Host: "https://api.example.com"}
	if err := k8sratelimit.Configure(rc); err != nil {
		log.Fatal(err)
	}
}
