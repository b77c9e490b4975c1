// Command kube-ratelimit shows k8sratelimit at work and inspects its
// configuration. Outside this repository, run it with
//
//	go run github.com/k8sratelimit/k8sratelimit/cmd/kube-ratelimit@latest <command>
//
// Usage (each command's -h prints its flags, under the header
// "Usage: kube-ratelimit <command> [flags]"):
//
//	kube-ratelimit demo [-workers N] [-duration D] [-limit N] [-timespan D] [-compare]
//	kube-ratelimit load -kubeconfig F [-context C] [-workers N] [-duration D] [-limit N] [-timespan D]
//	kube-ratelimit config
//	kube-ratelimit status [-watch] [-interval D] [-owner O]
//
// demo starts an in-process API server simulation that enforces its own
// capacity the way API Priority and Fairness does (429 with Retry-After),
// drives it with many workers through the limiter configured from the
// environment, shows progress, and ends with a table of what happened;
// -compare runs the same load with client-go's default limiter and with no
// limiter, side by side. load runs the same kind of load, read-only (namespace
// lists and /version), against a real cluster. Both stop at their -duration:
// calls still waiting then, for the budget or for the server, are cut off;
// a worker refused with a RateLimitExceededError waits its RetryAfter before
// its next call. config loads the KUBERNETES_RATELIMIT*
// environment strictly and prints the effective settings. status, with the
// Redis store, prints every shared budget: used / limit in the current
// window, waiting reservations, processes sharing it, cooldown left and
// seats, under a line giving the time it was read; with -watch it redraws
// the table in place when standard output is a terminal (cursor home, clear
// screen) and appends one table after another otherwise.
//
// config prints each value as its variable accepts it (a default as the
// value in effect, CONCURRENCY_MAX's 100 included; an unset one with no
// value of its own, such as MAX_WAIT without a cap, as nothing), so that
// the table set back in the environment loads as the same configuration,
// the redacted Redis URL aside. It exits with status 2 when
// the configuration is invalid, printing the error that names the variable.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
)

func main() {
	// go-redis's lines about the store's calls (a dial failure each call
	// during an outage) go to the store's logger, not to standard error:
	// redisstore.NewFromURL routes them, the others to klog.
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run executes the command line args with environment environ and returns
// the exit status: 0 on success, 2 for invalid configuration or usage.
func run(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return demoCmd(args[1:], environ, stdout, stderr)
	case "load":
		return loadCmd(args[1:], environ, stdout, stderr)
	case "config":
		return configCmd(args[1:], environ, stdout, stderr)
	case "status":
		return statusCmd(args[1:], environ, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "kube-ratelimit: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// configCmd prints the effective settings as a table, or the configuration
// error with exit status 2.
func configCmd(args, environ []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("config", "Loads the KUBERNETES_RATELIMIT* environment strictly and prints the effective\nsettings, each as its variable accepts it. Exits with status 2 when the\nconfiguration is invalid.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return parseError("config", err, stderr)
	}
	if fs.NArg() > 0 {
		return parseError("config", fmt.Errorf("unexpected argument %q", fs.Arg(0)), stderr)
	}
	cfg, err := k8sratelimit.LoadConfig(environ)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit: %v\n", err)
		if errors.As(err, new(*rlerrors.InvalidConfigurationError)) {
			return 2
		}
		return 1
	}
	// Each value is printed as its variable accepts it, and an unset one
	// with no value of its own as nothing: set back in the environment, the table loads as
	// the same configuration (the Redis URL aside, which is redacted).
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tEFFECTIVE VALUE")
	for _, kv := range cfg.Describe() {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit: %v\n", err)
		return 1
	}
	if !cfg.Enabled {
		fmt.Fprintln(stdout, "\nrate limiting is disabled: clients are left exactly as they are")
	}
	return 0
}
