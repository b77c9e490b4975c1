// Command benchreport writes BENCHMARKS.md from the output of the
// benchmarks (go test -bench, any number of runs) and, when given, the
// end-to-end suite's -v output; without it, the end-to-end section of the
// previous BENCHMARKS.md is kept as it was. hack/bench-report.sh runs it:
//
//	go run ./hack/benchreport -previous BENCHMARKS.md -o BENCHMARKS.md \
//	    -date 2026-12-05 -machine '2 CPUs ...' inprocess.txt redis.txt
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	var m meta
	out := fs.String("o", "BENCHMARKS.md", "the file to write")
	previous := fs.String("previous", "BENCHMARKS.md", "the BENCHMARKS.md whose end-to-end section is kept without -e2e")
	e2ePath := fs.String("e2e", "", "the end-to-end suite's go test -v output (optional)")
	fs.StringVar(&m.date, "date", "", "the date of the run")
	fs.StringVar(&m.machine, "machine", "", "the machine, one sentence")
	fs.StringVar(&m.e2eNote, "e2e-note", "", "appended to the end-to-end section's date, e.g. \", with the race detector\"")
	fs.IntVar(&m.rounds, "rounds", 0, "the interleaved in-process rounds")
	fs.IntVar(&m.redisCount, "redis-count", 0, "the runs of the Redis benchmarks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("no benchmark output given")
	}
	r := results{}
	for _, p := range fs.Args() {
		if err := parseFile(p, func(f *os.File) error { return parseBench(r, f) }); err != nil {
			return err
		}
	}
	var e2e *e2eFigures
	if *e2ePath != "" {
		e2e = &e2eFigures{}
		if err := parseFile(*e2ePath, func(f *os.File) (err error) { *e2e, err = parseE2E(f); return err }); err != nil {
			return err
		}
	}
	section := ""
	if e2e == nil {
		prev, err := os.ReadFile(*previous)
		if err != nil {
			return fmt.Errorf("the previous BENCHMARKS.md, for its end-to-end section: %w", err)
		}
		section = sectionOf(string(prev), e2eHeading)
	}
	doc, err := report(r, m, e2e, section)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, []byte(doc), 0o644)
}

// parseFile opens path and parses it with parse; errors name the file.
func parseFile(path string, parse func(*os.File) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := parse(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// sectionOf returns the section of doc under heading, the heading
// included, up to the next heading of its level; "" when doc has none.
func sectionOf(doc, heading string) string {
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i+1]
	}
	return heading + "\n" + rest
}
