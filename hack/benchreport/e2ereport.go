package main

import (
	"fmt"
	"strings"
)

// The tests whose -v output the end-to-end section reads.
const (
	testRejecting = "TestSeatsAgainstARejectingLevel"
	testQueueing  = "TestSeatsAgainstAQueueingLevel"
	testDefault   = "TestSeatsDefaultConfiguration"
	testRedis     = "TestSeatsSharedThroughRedis"
	testAPF       = "TestAPFThrottlingWithAndWithoutLimiter"
	testClasses   = "TestTrafficClassesUnderAStorm"
)

// pct is a as a percentage of b.
func pct(a, b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(a)/float64(b))
}

// e2eTable writes the end-to-end section from the suite's -v output.
func e2eTable(f e2eFigures, m meta) (string, error) {
	rej, err := f.table(testRejecting, 3) // one per seat, auto, off
	if err != nil {
		return "", err
	}
	que, err := f.table(testQueueing, 2) // no limiter, auto
	if err != nil {
		return "", err
	}
	red, err := f.table(testRedis, 5) // best, two processes, shared, fixed, default
	if err != nil {
		return "", err
	}
	dflt := f.runs[testDefault]
	if len(dflt) == 0 {
		return "", fmt.Errorf("e2e output: %s logged no run", testDefault)
	}
	d := dflt[len(dflt)-1]
	apf429, ok := f.apf["429s received"]
	if !ok {
		return "", fmt.Errorf("e2e output: %s logged no figures table", testAPF)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", e2eHeading)
	fmt.Fprintf(&b, `A real kube-apiserver whose API Priority and Fairness level for the client
has %d seats (e2e/, `+"`E2E=1 make bench-report`"+`), measured %s%s. "One worker
per seat" is %d workers with no limiter, the best possible; the limited runs
have 40 workers, the rate budget far above the server unless the default
configuration (400 per minute) is named.

| run | served | 429s / sent |
|---|---|---|
`, rej[0].seats(), m.date, m.e2eNote, rej[0].seats())
	row := func(cols ...string) { b.WriteString("| " + strings.Join(cols, " | ") + " |\n") }
	frac := func(s seatsRow) string { return fmt.Sprintf("%d / %d", s.throttled, s.sent) }
	row("one process, concurrency `auto`, level rejects", "**"+pct(rej[1].served, rej[0].served)+"** of one worker per seat", frac(rej[1]))
	row("one process, concurrency `off`, level rejects", fmt.Sprintf("%d calls in all", rej[2].served), frac(rej[2]))
	row("one process, default configuration, 30 s", fmt.Sprintf("**%d** of the 400 allowed", d.served), frac(d))
	row("one process, `auto`, level queues", "**"+pct(que[1].served, que[0].served)+"** of no limiter", frac(que[1]))
	row("2 processes × 20 workers through Redis, `auto`", "**"+pct(red[2].served, red[0].served)+"** of one process's best, "+
		pct(red[2].served, red[1].served)+" of two processes' best", frac(red[2]))
	row("… the limit fixed at the seats", pct(red[3].served, red[1].served)+" of two processes' best", frac(red[3]))
	row("2 processes through Redis, default configuration, 30 s", fmt.Sprintf("**%d** of the 400 allowed", red[4].served), frac(red[4]))
	failed := f.apf["calls failed"]
	row("50 workers × 6 calls, budget 3 per 100 ms (`TestAPF`): no limiter; k8sratelimit",
		fmt.Sprintf("%s calls failed; %s (client-go retrying)", failed[0], failed[1]), fmt.Sprintf("%s 429s; **%s**", apf429[0], apf429[1]))
	classes, err := classesSection(f.classes)
	if err != nil {
		return "", err
	}
	return b.String() + classes, nil
}

// classesSection writes the traffic classes' run from what its test
// logged: a heading line, a table of a heading, a rule and three runs,
// and the ratio of the writes' p99 to the reconciler's alone.
func classesSection(lines []string) (string, error) {
	if len(lines) != 7 || !strings.HasPrefix(lines[6], "traffic classes: write p99") {
		return "", fmt.Errorf("e2e output: %s logged %d lines of its table and figures, want 7 (did it run, and pass?)", testClasses, len(lines))
	}
	head, _ := strings.CutPrefix(lines[0], "traffic classes: ")
	ratio := lines[6][strings.LastIndex(lines[6], ", ")+2:]
	var b strings.Builder
	fmt.Fprintf(&b, `
A storm on one budget (`+"`TestTrafficClassesUnderAStorm`"+`), %s:
a reconciler reading and updating ConfigMaps 20 times a second, 40 workers
relisting 200 ConfigMaps, client-go's event recorder asked for 200 events a
second, and leader election. With the storm and the classes on, the
writes' p99 is %s.

`, strings.TrimSuffix(head, ":"), ratio)
	for _, l := range lines[1:6] {
		b.WriteString(l + "\n")
	}
	return b.String(), nil
}

// seats is the seats of a one-per-seat baseline: its workers, which
// its name starts with.
func (s seatsRow) seats() int {
	var n int
	if _, err := fmt.Sscanf(s.name, "%d workers", &n); err != nil {
		return 0
	}
	return n
}

// reproduce writes the machine and the commands.
func reproduce(m meta) string {
	return fmt.Sprintf("## Machine and how to reproduce\n\n%s.\n\n", m.machine) + "```sh\n" +
		`make bench-report          # this file and docs/benchmarks-raw.txt (about 15 minutes on 2 idle cores)
E2E=1 make bench-report    # and the end-to-end section (after make e2e has built the servers)

# one table at a time
go test -run '^$' -bench 'AdmissionPaired|BudgetWait|RateAllow|Flowcontrol|RateLimiterTryAccept|Transport' -benchmem ./limiter/
go test -run '^$' -bench 'AdmissionPaired|MemoryReserve' -benchmem ./store/memorystore/
go test -run '^$' -bench 'RedisAdmission|RedisMemory' -benchmem ./store/redisstore/   # needs redis-server on PATH
go test -run '^$' -bench SeatsSharedThroughRedis -benchtime 5000x .
cd e2e && go test -count=1 -run 'TestAPF|TestSeats|TestTrafficClasses' -v .              # after make e2e
` + "```\n"
}
