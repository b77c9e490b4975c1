package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// seatsRow is one row of the table the seats tests log (servedTable in
// e2e/seats_test.go): a run's name, requests served, sent, answered 429,
// and its concurrency limit at the end.
type seatsRow struct {
	name                           string
	served, sent, throttled, limit int
}

// e2eFigures are what the end-to-end tests' -v output says, by test.
type e2eFigures struct {
	// tables holds the rows of the seats tables, in the order logged, by
	// top-level test name.
	tables map[string][]seatsRow
	// runs holds the single runs logged as "name: N served, T of S sent
	// answered 429", by top-level test name.
	runs map[string][]seatsRow
	// apf holds TestAPF's figures table: each row's label and its two
	// values, without and with the limiter, as logged.
	apf map[string][2]string
	// classes holds what the traffic classes test logged: its heading
	// ("traffic classes: ..."), then its table's lines, as markdown.
	classes []string
}

var (
	testLine  = regexp.MustCompile(`^=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)`)
	tableRow  = regexp.MustCompile(`^(\S.*?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`)
	runLine   = regexp.MustCompile(`^(?:\S+\.go:\d+: )?(.+?): (\d+) served, (\d+) of (\d+) sent answered 429`)
	apfRowRe  = regexp.MustCompile(`^(calls|calls failed|requests sent \(incl\. retries\)|429s received|duration)\s+(\S+)\s+(\S+)$`)
	logPrefix = regexp.MustCompile(`^\S+_test\.go:\d+: `)
)

// parseE2E reads go test -v output of the e2e suite.
func parseE2E(in io.Reader) (e2eFigures, error) {
	f := e2eFigures{tables: map[string][]seatsRow{}, runs: map[string][]seatsRow{}, apf: map[string][2]string{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	test := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := testLine.FindStringSubmatch(line); m != nil {
			test, _, _ = strings.Cut(m[1], "/")
			continue
		}
		line = logPrefix.ReplaceAllString(line, "")
		if test == testClasses && (strings.HasPrefix(line, "|") || strings.HasPrefix(line, "traffic classes: ")) {
			if strings.HasPrefix(line, "traffic classes: a priority") {
				f.classes = nil // a later run's table replaces an earlier one
			}
			f.classes = append(f.classes, line)
			continue
		}
		if m := runLine.FindStringSubmatch(line); m != nil {
			f.runs[test] = append(f.runs[test], row(m[1], m[2], m[4], m[3], "0"))
			continue
		}
		if m := tableRow.FindStringSubmatch(line); m != nil {
			f.tables[test] = append(f.tables[test], row(m[1], m[2], m[3], m[4], m[5]))
			continue
		}
		if m := apfRowRe.FindStringSubmatch(line); m != nil && strings.HasPrefix(test, "TestAPF") {
			f.apf[m[1]] = [2]string{m[2], m[3]}
		}
	}
	return f, sc.Err()
}

// row makes a seatsRow of figures the regular expressions matched as
// digits.
func row(name, served, sent, throttled, limit string) seatsRow {
	n := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			return 0 // digits too long for an int: shown as 0
		}
		return v
	}
	return seatsRow{name: strings.TrimSpace(name), served: n(served), sent: n(sent), throttled: n(throttled), limit: n(limit)}
}

// table returns the rows of test's table, and an error naming the test
// when it logged fewer than want.
func (f e2eFigures) table(test string, want int) ([]seatsRow, error) {
	rows := f.tables[test]
	if len(rows) < want {
		return nil, fmt.Errorf("e2e output: %s logged %d table rows, want %d (did it run, and pass?)", test, len(rows), want)
	}
	return rows[len(rows)-want:], nil
}
