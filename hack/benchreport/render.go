package main

import (
	"fmt"
	"strings"
)

// e2eHeading is the heading of the end-to-end section, which a report
// without e2e output copies from the previous BENCHMARKS.md.
const e2eHeading = "## What happens against a real API server"

// meta is what the report says about the run.
type meta struct {
	date, machine      string
	rounds, redisCount int
	benchtime, e2eNote string
}

// report writes BENCHMARKS.md: the in-process and Redis tables from r,
// and the end-to-end section from e2e when given, else e2eSection as it
// was.
func report(r results, m meta, e2e *e2eFigures, e2eSection string) (string, error) {
	var b strings.Builder
	b.WriteString(intro(m))
	b.WriteString(requestTable(r))
	b.WriteString(redisTable(r))
	if e2e != nil {
		s, err := e2eTable(*e2e, m)
		if err != nil {
			return "", err
		}
		e2eSection = s
	}
	if e2eSection == "" {
		return "", fmt.Errorf("no e2e output given, and the previous BENCHMARKS.md has no %q section to keep", e2eHeading)
	}
	b.WriteString(strings.TrimRight(e2eSection, "\n") + "\n\n")
	b.WriteString(reproduce(m))
	return b.String(), nil
}

func intro(m meta) string {
	return fmt.Sprintf(`# Benchmarks

What k8sratelimit costs, beside what a user would otherwise use. Written by
`+"`make bench-report`"+` (hack/bench-report.sh) on %s; the raw output and the
benchstat summaries are in [docs/benchmarks-raw.txt](docs/benchmarks-raw.txt),
how each figure is taken in [docs/benchmarks-method.md](docs/benchmarks-method.md).
Medians of %d interleaved rounds in-process and %d runs with Redis; a ratio
below 1 means k8sratelimit is cheaper.

`, m.date, m.rounds, m.redisCount)
}

// cell formats the median of a figure, or "–" when it was not measured.
func cell(r results, name, unit, format string) string {
	v, ok := r.median(name, unit)
	if !ok {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// ratio formats the ratio of two medians, or "–".
func ratio(r results, name, unit, otherName, otherUnit string) string {
	a, ok1 := r.median(name, unit)
	b, ok2 := r.median(otherName, otherUnit)
	if !ok1 || !ok2 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func requestTable(r results) string {
	var b strings.Builder
	b.WriteString(`## What does a request cost?

Admission on a budget with room to spare (the decision, never a sleep), in
one process with the memory store, against ` + "`golang.org/x/time/rate`" + `'s
` + "`Limiter.Allow`" + ` and client-go's token bucket (` + "`flowcontrol`" + ` ` + "`TryAccept`" + `, the
default limiter of every ` + "`rest.Config`" + `). "Paired" rows take turns with the
references 256 calls at a time: the ratios to trust on a noisy machine.

| per request | ns | ÷ ` + "`rate.Allow`" + ` | ÷ ` + "`TryAccept`" + ` | ÷ bare GET | allocs/op |
|---|---|---|---|---|---|
`)
	row := func(cols ...string) { b.WriteString("| " + strings.Join(cols, " | ") + " |\n") }
	const lim, mem = "limiter/", "memorystore/"
	row("`Budget.Wait` (every request through the Transport), paired",
		cell(r, lim+"AdmissionPaired", "wait-ns/call", "%.0f"),
		cell(r, lim+"AdmissionPaired", "wait/rate", "%.2f×"),
		cell(r, lim+"AdmissionPaired", "wait/flowcontrol", "%.2f×"), "",
		cell(r, lim+"BudgetWait/serial", "allocs/op", "%.0f"))
	row("`Budget.Wait`, parallel",
		cell(r, lim+"BudgetWait/parallel", "ns/op", "%.0f"),
		ratio(r, lim+"BudgetWait/parallel", "ns/op", lim+"RateAllow/finite/parallel", "ns/op"),
		ratio(r, lim+"BudgetWait/parallel", "ns/op", lim+"FlowcontrolTryAccept/parallel", "ns/op"), "",
		cell(r, lim+"BudgetWait/parallel", "allocs/op", "%.0f"))
	for _, s := range []string{"window", "linear"} {
		row("memory store `Reserve`, `"+s+"`, paired",
			cell(r, mem+"AdmissionPaired", s+"-ns/call", "%.0f"),
			cell(r, mem+"AdmissionPaired", s+"/rate", "%.2f×"),
			cell(r, mem+"AdmissionPaired", s+"/flowcontrol", "%.2f×"), "",
			cell(r, mem+"MemoryReserve/"+s+"/serial", "allocs/op", "%.0f"))
	}
	row("`RateLimiter.TryAccept` (the `flowcontrol.RateLimiter` adapter)",
		cell(r, lim+"RateLimiterTryAccept/serial", "ns/op", "%.0f"),
		ratio(r, lim+"RateLimiterTryAccept/serial", "ns/op", lim+"RateAllow/finite/serial", "ns/op"),
		ratio(r, lim+"RateLimiterTryAccept/serial", "ns/op", lim+"FlowcontrolTryAccept/serial", "ns/op"), "",
		cell(r, lim+"RateLimiterTryAccept/serial", "allocs/op", "%.0f"))
	row("Transport with seats, no network (a stub that answers at once)",
		cell(r, lim+"TransportOverhead/wrapped/serial", "ns/op", "%.0f"),
		ratio(r, lim+"TransportOverhead/wrapped/serial", "ns/op", lim+"RateAllow/finite/serial", "ns/op"),
		ratio(r, lim+"TransportOverhead/wrapped/serial", "ns/op", lim+"FlowcontrolTryAccept/serial", "ns/op"), "",
		cell(r, lim+"TransportOverhead/wrapped/serial", "allocs/op", "%.0f"))
	for _, m := range []string{"serial", "parallel"} {
		row("one loopback GET through the Transport, paired, "+m,
			cell(r, lim+"TransportGETPaired/"+m, "wrapped-ns/GET", "%.0f"), "", "",
			cell(r, lim+"TransportGETPaired/"+m, "wrapped/bare", "%.3f")+" (A/A control "+cell(r, lim+"TransportGETPaired/"+m, "control/bare", "%.3f")+")",
			cell(r, lim+"TransportGET/wrapped/"+m, "allocs/op", "%.0f")+" (bare "+cell(r, lim+"TransportGET/bare/"+m, "allocs/op", "%.0f")+")")
	}
	b.WriteString(`
The one allocation a GET adds is the wrapper that gives a response's seat
back at EOF or Close.

`)
	return b.String()
}

func redisTable(r results) string {
	var b strings.Builder
	b.WriteString(`## What does Redis cost?

The Redis store beside ` + "`github.com/go-redis/redis_rate/v10`" + ` (GCRA, one call per
request) and a bare ` + "`EVALSHA`" + ` of a script that returns at once (the floor of
any script), on loopback; "paired" takes turns 256 calls at a time.

| | figure |
|---|---|
`)
	row := func(what, fig string) { b.WriteString("| " + what + " | " + fig + " |\n") }
	const rs = "redisstore/"
	for _, n := range []struct{ key, name string }{{"1-budget", "one budget"}, {"10k-budgets", "10,000 budgets"}} {
		p := rs + "RedisAdmissionPaired/" + n.key
		row("`window` decision ÷ `redis_rate` call, "+n.name+", paired",
			cell(r, p, "window/redis_rate", "**%.2f×**")+" (`linear` "+cell(r, p, "linear/redis_rate", "%.2f×")+")")
		row("`window` decision ÷ bare `EVALSHA`, "+n.name+", paired",
			cell(r, p, "window/evalsha", "%.2f×")+" (`linear` "+cell(r, p, "linear/evalsha", "%.2f×")+")")
	}
	a := rs + "RedisAdmission/"
	row("Redis's time per decision, one budget, serial (`INFO commandstats`)",
		"`window` "+cell(r, a+"window/1-budget/serial", "server-µs/op", "%.1f µs")+", `redis_rate` "+cell(r, a+"redis_rate/1-budget/serial", "server-µs/op", "%.1f µs"))
	row("client allocations per decision",
		"`window` "+cell(r, a+"window/1-budget/serial", "allocs/op", "%.0f")+", `redis_rate` "+cell(r, a+"redis_rate/1-budget/serial", "allocs/op", "%.0f"))
	s := "k8sratelimit/SeatsSharedThroughRedis"
	row("Redis functions (round trips) per request, 2 processes × 20 workers sharing 3 seats",
		cell(r, s, "functions/op", "**%.2f**")+", Redis CPU "+cell(r, s, "redis-cpu-µs/op", "%.0f µs")+" per request")
	m := rs + "RedisMemory/"
	row("Redis memory per full budget, `window` 400 per minute",
		cell(r, m+"window-400-per-minute", "B/budget", "**%.0f B**")+" ("+cell(r, m+"window-400-per-minute", "B/send", "%.1f B")+" per send)")
	row("… `window` 10,000 per minute",
		cell(r, m+"window-10000-per-minute", "B/budget", "%.0f B")+" ("+cell(r, m+"window-10000-per-minute", "B/send", "%.1f B")+" per send)")
	row("… `linear` 400 per minute", cell(r, m+"linear-400-per-minute", "B/budget", "%.0f B"))
	b.WriteString("\n")
	return b.String()
}
