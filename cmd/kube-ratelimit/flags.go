package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/k8sratelimit/k8sratelimit"
)

// runFlags are the flags demo and load share: how many workers, for how
// long, and the budget. A limit or timespan given on the command line, or
// set by the command's own defaults, overrides the environment's
// KUBERNETES_RATELIMIT and KUBERNETES_RATELIMIT_TIMESPAN.
type runFlags struct {
	workers  int
	duration time.Duration
	limit    int
	timespan time.Duration
	// limitGiven and timespanGiven report that the command line set them.
	limitGiven, timespanGiven bool
}

// register adds the flags to fs, with the current values as defaults. A
// zero limit or timespan means: the environment's.
func (r *runFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&r.workers, "workers", r.workers, "concurrent workers, each with its own clientset")
	fs.DurationVar(&r.duration, "duration", r.duration, "how long the load lasts; calls still waiting then are cut off")
	fs.IntVar(&r.limit, "limit", r.limit, "requests per timespan for the API server (overrides KUBERNETES_RATELIMIT)")
	fs.DurationVar(&r.timespan, "timespan", r.timespan, "the budget's timespan, any duration (overrides KUBERNETES_RATELIMIT_TIMESPAN)")
}

// parsed checks the flags after fs.Parse and records which of them the
// command line gave.
func (r *runFlags) parsed(fs *flag.FlagSet) error {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "limit":
			r.limitGiven = true
		case "timespan":
			r.timespanGiven = true
		}
	})
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case r.workers < 1:
		return fmt.Errorf("-workers must be at least 1, not %d", r.workers)
	case r.duration <= 0:
		return fmt.Errorf("-duration must be positive, not %v", r.duration)
	}
	return nil
}

// config is the configuration from environ, enabled whatever it says (the
// commands exist to show the limiter at work), with the limit and
// timespan of the flags. It is validated: a -limit 0 is an error, not the
// environment's limit.
func (r runFlags) config(environ []string) (k8sratelimit.Config, error) {
	cfg, err := k8sratelimit.LoadConfig(environ)
	if err != nil {
		return cfg, err
	}
	cfg.Enabled = true
	if r.limitGiven || r.limit != 0 {
		cfg.Limit = r.limit
	}
	if r.timespanGiven || r.timespan != 0 {
		cfg.Timespan = r.timespan
	}
	return cfg, cfg.Validate()
}
