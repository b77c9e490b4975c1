package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// usage is the help of the command itself.
const usage = `Usage: kube-ratelimit <command> [flags]

Commands:
  demo     run a load against a simulated API server through the limiter (-compare: also without it)
  load     run a read-only load against a real cluster (-kubeconfig F [-context C]) through the limiter
  config   load the KUBERNETES_RATELIMIT* environment strictly and print the effective settings
  status   with the Redis store: every shared budget, its use, waiters, processes and cooldown (-watch)

Run "kube-ratelimit <command> -h" for the flags of a command.
`

// newFlagSet returns the flag set of command cmd, writing to stderr. Every
// command's help reads the same way:
//
//	Usage: kube-ratelimit <cmd> [flags]
//
//	<about>
//
//	Flags:
//	  -name ...
func newFlagSet(cmd, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kube-ratelimit "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: kube-ratelimit %s [flags]\n\n%s\n", cmd, about)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseError reports an error of a command's flags on stderr, unless the
// flag package has already (the help it printed for -h, or a bad flag
// followed by the help), and returns the exit status: 0 after -h, 2 for a
// usage error.
func parseError(cmd string, err error, stderr io.Writer) int {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFlagParse):
		return 2
	}
	fmt.Fprintf(stderr, "kube-ratelimit %s: %v\n", cmd, err)
	return 2
}

// errFlagParse marks an error the flag package has printed already.
var errFlagParse = errors.New("invalid flags")

// parseFlags parses args with fs, marking the flag package's own errors
// (which it prints, with the help) with errFlagParse.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errFlagParse, err)
	}
	return nil
}
