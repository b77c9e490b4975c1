package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// statusCmd prints every budget in the shared Redis store: used / limit in
// the current window, waiting reservations, processes sharing it and the
// cooldown left; -watch refreshes it.
func statusCmd(args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	watch := fs.Bool("watch", false, "refresh until interrupted")
	interval := fs.Duration("interval", 2*time.Second, "how often -watch refreshes")
	owner := fs.String("owner", "", "show only the budgets of this owner (default: every owner)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := k8sratelimit.LoadConfig(environ)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ratelimit: %v\n", err)
		if errors.As(err, new(*rlerrors.InvalidConfigurationError)) {
			return 2
		}
		return 1
	}
	if !cfg.Enabled || cfg.Store != k8sratelimit.StoreRedis {
		fmt.Fprintf(stderr, "kube-ratelimit status: budgets are shared only with %s=redis; this process's budgets (store %q) live in memory\n",
			k8sratelimit.EnvStore, cfg.Store)
		return 2
	}
	s, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{Timeout: 5 * time.Second})
	if err != nil {
		// Not err itself: go-redis quotes query values, which may be secret.
		fmt.Fprintf(stderr, "kube-ratelimit: %s=%q: cannot make a Redis client from it\n", k8sratelimit.EnvRedisURL, cfg.RedisURL)
		return 2
	}
	defer s.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for {
		if err := printStatus(ctx, s, *owner, stdout); err != nil {
			fmt.Fprintf(stderr, "kube-ratelimit: reading %s: %v\n", cfg.RedisURL, err)
			return 1
		}
		if !*watch {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(*interval):
		}
		fmt.Fprintln(stdout)
	}
}

// printStatus prints one table of the budgets of owner (all when empty).
func printStatus(ctx context.Context, s *redisstore.Store, owner string, w io.Writer) error {
	budgets, err := s.Status(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\n", time.Now().Format(time.TimeOnly))
	fmt.Fprintln(tw, "BUDGET\tSTRATEGY\tUSED/LIMIT\tPER\tWAITING\tPROCESSES\tCOOLDOWN\tSEATS")
	shown := 0
	for _, b := range budgets {
		if owner != "" && !strings.HasPrefix(b.Key, "k8s:"+owner+":") {
			continue
		}
		used := "-"
		if b.Strategy == store.StrategyWindow {
			used = fmt.Sprintf("%d/%d", b.Used, b.Limit)
		} else if b.Limit > 0 {
			used = fmt.Sprintf("-/%d", b.Limit)
		}
		cooldown := "-"
		if b.Cooldown > 0 {
			cooldown = b.Cooldown.Round(100 * time.Millisecond).String()
		}
		seats := "-"
		if b.SeatLimit > 0 {
			seats = fmt.Sprintf("%d/%d", b.SeatsInUse, b.SeatLimit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%d\t%s\t%s\n", b.Key, b.Strategy, used, b.Timespan, b.Waiting, b.Processes, cooldown, seats)
		shown++
	}
	if shown == 0 {
		fmt.Fprintln(tw, "(no budgets in use)")
	}
	return tw.Flush()
}
