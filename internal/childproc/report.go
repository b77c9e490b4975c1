package childproc

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/k8sratelimit/k8sratelimit/internal/decided"
)

// Report is what a child prints for its parent, one record a line: a word
// naming the kind of record, then its fields. The records every child may
// print have methods of their own and come back from Parse in fields of
// Parsed; a child's own kinds go through Add and come back in Parsed.Other.
// The zero Report is empty and ready to use; it is safe for concurrent use.
type Report struct {
	mu    sync.Mutex
	lines []string
}

// Add records a line of format and args.
func (r *Report) Add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// Sends records when requests left the child: "at <time>" each.
func (r *Report) Sends(at []time.Time) {
	for _, t := range at {
		r.Add("at %d", t.UnixNano())
	}
}

// Decisions records when the child's store let requests go: "decided
// <from> <to>" each.
func (r *Report) Decisions(spans []decided.Span) {
	for _, s := range spans {
		r.Add("decided %d %d", s.From.UnixNano(), s.To.UnixNano())
	}
}

// Result records how many calls the child made that succeeded and failed:
// "sent <n> failed <n>".
func (r *Report) Result(sent, failed int) { r.Add("sent %d failed %d", sent, failed) }

// Print writes the records to standard output.
func (r *Report) Print() {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := bufio.NewWriter(os.Stdout)
	for _, s := range r.lines {
		fmt.Fprintln(w, s)
	}
	_ = w.Flush()
}

// Parsed is a child's output read back.
type Parsed struct {
	Sends        []time.Time    // "at" records
	Decisions    []decided.Span // "decided" records
	Sent, Failed int            // the "sent … failed …" record
	Finished     bool           // whether there was a "sent … failed …" record
	Other        []string       // every other line, in order: the child's own records and its log
}

// Parse reads a child's output: its Report and its log, in any order.
func Parse(out string) Parsed {
	var p Parsed
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "at":
			p.Sends = append(p.Sends, Time(f[1]))
		case len(f) == 3 && f[0] == "decided":
			p.Decisions = append(p.Decisions, decided.Span{From: Time(f[1]), To: Time(f[2])})
		case len(f) == 4 && f[0] == "sent" && f[2] == "failed":
			p.Sent, _ = strconv.Atoi(f[1])
			p.Failed, _ = strconv.Atoi(f[3])
			p.Finished = true
		default:
			p.Other = append(p.Other, sc.Text())
		}
	}
	return p
}

// Time reads a time a child printed: Unix nanoseconds.
func Time(field string) time.Time {
	ns, _ := strconv.ParseInt(field, 10, 64)
	return time.Unix(0, ns)
}
