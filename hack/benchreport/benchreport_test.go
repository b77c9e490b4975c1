package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBenchMedians(t *testing.T) {
	r := results{}
	require.NoError(t, parseBench(r, strings.NewReader(sampleBench)))
	tests := []struct {
		name, unit string
		want       float64
	}{
		{"limiter/BudgetWait/serial", "ns/op", 120},          // two runs: 110, 130
		{"limiter/AdmissionPaired", "wait/rate", 1.162},      // 1.137, 1.187
		{"memorystore/AdmissionPaired", "window/rate", 0.95}, // not limiter's
		{"redisstore/RedisAdmission/window/1-budget/serial", "server-µs/op", 14.2},
		{"redisstore/RedisMemory/window-400-per-minute", "B/budget", 4811},
		{"k8sratelimit/SeatsSharedThroughRedis", "functions/op", 1.05},
	}
	for _, tt := range tests {
		got, ok := r.median(tt.name, tt.unit)
		require.True(t, ok, "%s %s", tt.name, tt.unit)
		assert.InDelta(t, tt.want, got, 1e-9, "%s %s", tt.name, tt.unit)
	}
	_, ok := r.median("limiter/BudgetWait/serial", "no-such-unit")
	assert.False(t, ok)
}

func TestParseBenchNamesTheBadLine(t *testing.T) {
	err := parseBench(results{}, strings.NewReader("pkg: x\nBenchmarkX-2 100 12.5 ns/op 3\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	assert.Contains(t, err.Error(), "BenchmarkX-2")

	err = parseBench(results{}, strings.NewReader("BenchmarkX-2 100 twelve ns/op\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"twelve"`)
}

func TestParseE2E(t *testing.T) {
	f, err := parseE2E(strings.NewReader(sampleE2E))
	require.NoError(t, err)
	rej, err := f.table(testRejecting, 3)
	require.NoError(t, err)
	assert.Equal(t, seatsRow{name: "40 workers, k8sratelimit, concurrency auto", served: 16200, sent: 16202, throttled: 2, limit: 3}, rej[1])
	assert.Equal(t, 3, rej[0].seats())
	red, err := f.table(testRedis, 5)
	require.NoError(t, err)
	assert.Equal(t, 398, red[4].served)
	assert.Equal(t, []seatsRow{{name: "40 workers, k8sratelimit, default configuration", served: 399, sent: 400, throttled: 1}}, f.runs[testDefault])
	assert.Equal(t, [2]string{"230", "2"}, f.apf["429s received"])

	_, err = f.table(testQueueing, 3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), testQueueing)
}

func TestReportFromAllFigures(t *testing.T) {
	r := results{}
	require.NoError(t, parseBench(r, strings.NewReader(sampleBench)))
	f, err := parseE2E(strings.NewReader(sampleE2E))
	require.NoError(t, err)
	doc, err := report(r, meta{date: "2026-12-05", machine: "2 CPUs", rounds: 2, redisCount: 1}, &f, "")
	require.NoError(t, err)
	for _, want := range []string{
		"| `Budget.Wait` (every request through the Transport), paired | 110 | 1.16× | 1.15× |  | 0 |",
		"| `window` decision ÷ `redis_rate` call, one budget, paired | **1.12×** (`linear` 1.06×) |",
		"| Redis memory per full budget, `window` 400 per minute | **4811 B** (12.0 B per send) |",
		"| one process, concurrency `auto`, level rejects | **90 %** of one worker per seat | 2 / 16202 |",
		"| one process, default configuration, 30 s | **399** of the 400 allowed | 1 / 400 |",
		"| one process, `auto`, level queues | **100 %** of no limiter | 0 / 20040 |",
		"| 2 processes × 20 workers through Redis, `auto` | **75 %** of one process's best, 77 % of two processes' best | 3 / 15003 |",
		"| … the limit fixed at the seats | 90 % of two processes' best | 1 / 17551 |",
		"230 429s; **2**",
		"a priority level of 7 seats that rejects, a budget of 100 a second, 30s each",
		"writes' p99 is 15.5× alone's.",
		"| storm, classes on    | 599 of 599    | 5ms       | 104ms     |",
		"measured 2026-12-05",
		"\n## Machine and how to reproduce\n\n2 CPUs.\n",
	} {
		assert.Contains(t, doc, want)
	}
	assert.Contains(t, doc, "10,000 budgets, paired | – (`linear` –) |", "a figure not measured still has its row")
	assert.NotContains(t, doc, "%!")
	assert.LessOrEqual(t, strings.Count(doc, "\n"), 150, "BENCHMARKS.md fits one page")
}

func TestReportKeepsThePreviousE2ESection(t *testing.T) {
	dir := t.TempDir()
	prev := "# Benchmarks\n\nold\n\n" + e2eHeading + "\n\nmeasured 2026-12-04\n\n| a | b |\n\n## Machine and how to reproduce\n\nold machine\n"
	bench := filepath.Join(dir, "bench.txt")
	require.NoError(t, os.WriteFile(bench, []byte(sampleBench), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prev.md"), []byte(prev), 0o644))
	out := filepath.Join(dir, "out.md")
	require.NoError(t, run([]string{"-previous", filepath.Join(dir, "prev.md"), "-o", out, "-date", "2026-12-05", "-machine", "new machine", bench}))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(got), "\n"+e2eHeading+"\n\nmeasured 2026-12-04\n\n| a | b |\n\n## Machine and how to reproduce\n\nnew machine.\n")
	assert.NotContains(t, string(got), "old machine")
}

func TestReportWithoutAnyE2EFigures(t *testing.T) {
	_, err := report(results{}, meta{}, nil, sectionOf("# Benchmarks\n\nno section\n", e2eHeading))
	require.Error(t, err)
	assert.Contains(t, err.Error(), e2eHeading)
}

func FuzzParseBench(f *testing.F) {
	f.Add(sampleBench)
	f.Add("BenchmarkX-2 1 2 ns/op\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := results{}
		if err := parseBench(r, strings.NewReader(s)); err != nil {
			return
		}
		for name, units := range r {
			for unit := range units {
				_, ok := r.median(name, unit)
				assert.True(t, ok)
			}
		}
	})
}

func FuzzParseE2E(f *testing.F) {
	f.Add(sampleE2E)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseE2E(strings.NewReader(s))
		if err != nil {
			return
		}
		_, _ = e2eTable(got, meta{})
	})
}
