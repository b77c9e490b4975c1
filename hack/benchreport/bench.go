package main

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
)

// results are benchmark figures by benchmark and unit: every value one
// benchmark reported in a unit, over all its runs. A benchmark is named
// by its package's last element and its name without "Benchmark" and the
// GOMAXPROCS suffix: "limiter/BudgetWait/serial".
type results map[string]map[string][]float64

// parseBench reads the output of go test -bench (any number of runs and
// packages) and adds its figures to r. Lines that are not benchmark
// results are skipped; a result line whose figures cannot be read is an
// error naming the line.
func parseBench(r results, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	pkg := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = path.Base(strings.TrimSpace(p))
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		name, figures, err := parseBenchLine(line)
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if figures == nil {
			continue // a benchmark's name alone, before its sub-benchmarks
		}
		key := pkg + "/" + name
		if r[key] == nil {
			r[key] = map[string][]float64{}
		}
		for unit, v := range figures {
			r[key][unit] = append(r[key][unit], v)
		}
	}
	return sc.Err()
}

// parseBenchLine reads one result line: the name, the iterations, then
// value and unit pairs. It returns nil figures for a line that holds a
// name only (go test -v prints those).
func parseBenchLine(line string) (string, map[string]float64, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return "", nil, nil
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", nil, nil // not a result: "BenchmarkX ... --- FAIL" and the like
	}
	if len(f)%2 != 0 {
		return "", nil, fmt.Errorf("benchmark line %q: a value without its unit", line)
	}
	name := strings.TrimPrefix(f[0], "Benchmark")
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	figures := map[string]float64{}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, fmt.Errorf("benchmark line %q: value %q: %w", line, f[i], err)
		}
		figures[f[i+1]] = v
	}
	return name, figures, nil
}

// median returns the median of the benchmark's figures in unit, and false
// when there are none.
func (r results) median(name, unit string) (float64, bool) {
	vs := slices.Clone(r[name][unit])
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m], true
	}
	return (vs[m-1] + vs[m]) / 2, true
}
