package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/k8sratelimit/k8sratelimit/limiter"
)

// demoResult is what one run of the load measured.
type demoResult struct {
	name       string
	limited    bool // through k8sratelimit: its admission figures apply
	stats      *stats
	serverSeen int       // requests the server received, client-go's retries included
	throttled  int       // answered 429 by the server
	released   *instants // when the client side let each request go
	maxSent    int       // most requests let go in any rolling timespan
	maxWindow  int       // most requests the server received in any rolling timespan
}

// writeReport prints the results side by side.
func writeReport(w io.Writer, results []demoResult, limit int, timespan time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(r demoResult) string) {
		fmt.Fprint(tw, label+"\t")
		for _, r := range results {
			fmt.Fprint(tw, cell(r)+"\t")
		}
		fmt.Fprintln(tw)
	}
	limitedOnly := func(f func(r demoResult) string) func(r demoResult) string {
		return func(r demoResult) string {
			if !r.limited {
				return "-"
			}
			return f(r)
		}
	}
	row("", func(r demoResult) string { return r.name })
	row("calls made", func(r demoResult) string { return itoa(r.stats.calls.Load()) })
	row("calls succeeded", func(r demoResult) string { return itoa(r.stats.succeeded.Load()) })
	row("requests sent (incl. retries)", func(r demoResult) string { return strconv.Itoa(r.serverSeen) })
	row("admitted at once", limitedOnly(func(r demoResult) string { return itoa(r.stats.atOnce.Load()) }))
	row("deferred", limitedOnly(func(r demoResult) string { return itoa(r.stats.deferred.Load()) }))
	row("wait p50", limitedOnly(func(r demoResult) string { a, _, _ := r.stats.waitQuantiles(); return ms(a) }))
	row("wait p99", limitedOnly(func(r demoResult) string { _, b, _ := r.stats.waitQuantiles(); return ms(b) }))
	row("wait max", limitedOnly(func(r demoResult) string { _, _, c := r.stats.waitQuantiles(); return ms(c) }))
	row("write wait p99", limitedOnly(func(r demoResult) string { p99, _, _ := r.stats.classWaitP99(limiter.ClassWrite); return ms(p99) }))
	row("list wait p99", limitedOnly(func(r demoResult) string { p99, _, _ := r.stats.classWaitP99(limiter.ClassList); return ms(p99) }))
	row("events sent / refused", limitedOnly(func(r demoResult) string {
		_, sent, refused := r.stats.classWaitP99(limiter.ClassEvent)
		return strconv.Itoa(sent) + " / " + strconv.Itoa(refused)
	}))
	row("429s received", func(r demoResult) string { return strconv.Itoa(r.throttled) })
	row("concurrency limit at the end", limitedOnly(func(r demoResult) string {
		if n := r.stats.seatStatus().Limit; n > 0 {
			return strconv.Itoa(n)
		}
		return "off"
	}))
	row("rejected by max wait", limitedOnly(func(r demoResult) string { return itoa(r.stats.rejected.Load()) }))
	row("cut off by the end of the run", func(r demoResult) string { return itoa(r.stats.cutOff.Load()) })
	row("failed otherwise", func(r demoResult) string { return itoa(r.stats.failed.Load()) })
	row(fmt.Sprintf("most sent in any %v* (budget %d)", timespan-windowSlack(timespan), limit), func(r demoResult) string { return strconv.Itoa(r.maxSent) })
	row(fmt.Sprintf("most received by the server in any %v**", timespan), func(r demoResult) string {
		if r.maxWindow < 0 {
			return "-" // a real server does not tell
		}
		return strconv.Itoa(r.maxWindow)
	})
	tw.Flush()
	fmt.Fprintln(w, `
*  when the client side let each request go: k8sratelimit's decision, read just after the store answers (so a
   window 1% short of the timespan); with the Redis store, or without k8sratelimit, the request entering the
   transport.
** when each request reached the server's handler: the network and the server's scheduling spread arrivals, so
   two batches that left the client one timespan apart can arrive within one window.`)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
}

// windowSlack is how much shorter than the timespan the windows of the
// "most sent" row are: a decision's instant is read just after the store
// answers, a moment (scheduling) after the store decided.
func windowSlack(timespan time.Duration) time.Duration { return timespan / 100 }
