package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/k8sratelimit/k8sratelimit"
	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// statusCmd prints every budget in the shared Redis store: used / limit in
// the current window, waiting reservations, processes sharing it and the
// cooldown left; -watch refreshes it.
func statusCmd(args, environ []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "With KUBERNETES_RATELIMIT_STORE=redis, prints every budget in Redis: used / limit\nin the current window, reservations waiting, processes sharing it, cooldown left\nand seats held / concurrency limit. With -watch it redraws the table in place\nwhen standard output is a terminal, and appends one table after another\notherwise.", stderr)
	watch := fs.Bool("watch", false, "refresh until interrupted")
	interval := fs.Duration("interval", 2*time.Second, "how often -watch refreshes")
	owner := fs.String("owner", "", "show only the budgets of this owner (default: every owner)")
	if err := parseFlags(fs, args); err != nil {
		return parseError("status", err, stderr)
	}
	if fs.NArg() > 0 {
		return parseError("status", fmt.Errorf("unexpected argument %q", fs.Arg(0)), stderr)
	}
	if *interval <= 0 {
		return parseError("status", fmt.Errorf("-interval must be positive, not %v", *interval), stderr)
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
	// The command reports a Redis it cannot use itself, below: the
	// store's own report of it would only say it again.
	s, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{Timeout: 5 * time.Second, Logger: logr.Discard()})
	if err != nil {
		// Not err itself: go-redis quotes query values, which may be secret.
		fmt.Fprintf(stderr, "kube-ratelimit: %s=%q: cannot make a Redis client from it\n", k8sratelimit.EnvRedisURL, cfg.RedisURL)
		return 2
	}
	defer s.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	v := newStatusView(s, *owner, stdout, *watch, *interval)
	if err := v.run(ctx); err != nil {
		fmt.Fprintln(stderr, unusableMessage(cfg.RedisURL.String(), err))
		return 1
	}
	return 0
}

// newStatusView returns the view of status on budgets, redrawn every
// interval with watch.
func newStatusView(budgets *redisstore.Store, owner string, stdout io.Writer, watch bool, interval time.Duration) statusView {
	clk := clock.RealClock{}
	v := statusView{
		budgets:  budgets,
		owner:    owner,
		clock:    clk,
		out:      &screen{w: stdout, redraw: watch && isTerminal(stdout)},
		interval: interval,
	}
	if watch {
		v.wait = func(ctx context.Context) bool {
			select {
			case <-ctx.Done():
				return false
			case <-clk.After(interval):
				return true
			}
		}
	}
	return v
}

// unusableMessage says that the Redis at url (redacted) could not be
// read, why, in words that say what to fix, and the error itself.
func unusableMessage(url string, err error) string {
	return fmt.Sprintf("kube-ratelimit status: cannot read the budgets: Redis at %s is unusable (%s): %v", url, redisstore.Cause(err), err)
}

// budgetLister is what status reads: *redisstore.Store.
type budgetLister interface {
	Status(ctx context.Context) ([]store.BudgetStatus, error)
}

// statusView prints the status table once, or again after each wait.
type statusView struct {
	budgets  budgetLister
	owner    string // only this owner's budgets, when set
	clock    clock.PassiveClock
	out      *screen
	interval time.Duration // of -watch, for the header
	// wait waits for the next refresh and reports whether there is one;
	// nil prints the table once.
	wait func(ctx context.Context) bool
}

// run prints the table, and again after every wait until wait says stop.
func (v statusView) run(ctx context.Context) error {
	for {
		budgets, err := v.budgets.Status(ctx)
		if err != nil {
			return err
		}
		v.out.next()
		header := "Budgets in Redis at " + v.clock.Now().Format(time.TimeOnly)
		if v.wait != nil {
			header += fmt.Sprintf(" (every %v; Ctrl-C to stop)", v.interval)
		}
		fmt.Fprintln(v.out.w, header)
		if err := printStatus(budgets, v.owner, v.out.w); err != nil {
			return err
		}
		if v.wait == nil || !v.wait(ctx) {
			return nil
		}
	}
}

// screen is where status writes its tables. With redraw (standard output
// is a terminal and -watch is on), each table replaces the one before:
// the cursor goes home and the screen is cleared first. Otherwise (a file,
// a pipe, a single table) tables are appended, a blank line apart, so that
// the output reads as a log.
type screen struct {
	w      io.Writer
	redraw bool
	tables int
}

// clearScreen moves the cursor home (CSI H) and erases the screen (CSI 2J).
const clearScreen = "\x1b[H\x1b[2J"

// next starts a table.
func (s *screen) next() {
	switch {
	case s.redraw:
		fmt.Fprint(s.w, clearScreen)
	case s.tables > 0:
		fmt.Fprintln(s.w)
	}
	s.tables++
}

// printStatus prints one table of the budgets of owner (all when empty).
func printStatus(budgets []store.BudgetStatus, owner string, w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
