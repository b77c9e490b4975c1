package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

var _ store.SeatSharer = (*Store)(nil)

// SeatShare implements SeatSharer from the processes last counted sharing
// the budget (every few seconds of use, and at every upkeep) and this
// process's rank among them by name. Until a decision of this process's
// on the budget has counted them, it returns 0 processes and no share.
// When that count finds others, the share stays 0 for joinWait (see
// joined). In an outage, a budget not counted yet is this process's
// alone, as its rate budget is.
func (s *Store) SeatShare(key string, limit int) (share, processes int) {
	b, ok := s.existing(key)
	var n int
	if ok {
		n = int(b.procs.Load())
	}
	if n == 0 {
		if s.down.Load() {
			return max(limit, 1), 1
		}
		return 0, 0
	}
	if s.joinLeft(b) > 0 {
		return 0, n
	}
	share = limit / n
	if int(b.rank.Load()) < limit%n {
		share++
	}
	return max(share, 1), n
}

// ShareWait implements SeatSharer: what is left of this process's joinWait
// on the budget key.
func (s *Store) ShareWait(key string) time.Duration {
	b, ok := s.existing(key)
	if !ok {
		return 0
	}
	return s.joinLeft(b)
}

// joinLeft returns what is left of this process's joinWait on budget b.
func (s *Store) joinLeft(b *redisBudget) time.Duration {
	return time.Duration(max(b.joinUntil.Load()-s.localMicros(), 0)) * time.Microsecond
}

// A process that starts sharing a budget others already use takes no seat
// of it for joinWait after its first decision found them, and tells them
// on the budget's channel ("join:<process>"), so that they count the
// processes again at their next decision rather than at their next
// presence interval. Meanwhile their shares shrink and their requests in
// flight over them end; without the wait the newcomer's first requests
// would go over the limit the processes share, and on a level whose seats
// they fill draw a throttle that stops them all for a Retry-After. A
// request that takes longer than joinWait may still hold a seat over the
// new share when the newcomer's first request leaves.
const (
	joinWait   = 100 * time.Millisecond
	joinPrefix = "join:"
)

// joined tells the processes sharing b that this one has joined them.
func (s *Store) joined(b *redisBudget) {
	s.inBackground(func(ctx context.Context) error {
		return s.client.Publish(ctx, b.keys[0], joinPrefix+s.proc).Err()
	})
}

// parseJoin reads the message of a process that joined a budget: its
// name, and whether msg is one.
func parseJoin(msg string) (proc string, ok bool) {
	proc, ok = strings.CutPrefix(msg, joinPrefix)
	return proc, ok && proc != ""
}

// recount makes the next decision on the budget of channel count the
// processes sharing it: another process has joined it.
func (s *Store) recount(channel string) {
	if b, ok := s.budgetOf(channel); ok {
		b.lastHere.Store(math.MinInt64 / 2)
	}
}

// budgetOf returns the budget whose channel (its first key, see
// redisKeys) is channel, if this process uses it.
func (s *Store) budgetOf(channel string) (*redisBudget, bool) {
	key, tagged := strings.CutPrefix(channel, "{")
	key, ok := strings.CutSuffix(key, "}:"+layout+":w")
	if !tagged || !ok {
		return nil, false
	}
	return s.existing(key)
}

// cutPrefix starts the message of a cut on a budget's channel:
// "cut:<process>:<limit>:<ceiling>:<probe after, ms>", and riseSuffix
// ends that of a rise of the ceiling (store.SeatCut.Rise).
const (
	cutPrefix  = "cut:"
	riseSuffix = ":rise"
)

// ShareCut implements SeatSharer: one script that publishes the cut on the
// budget's channel and keeps it in the budget's state, from which a
// process that starts sharing the budget later learns it (see OnCut).
func (s *Store) ShareCut(key string, cut store.SeatCut) {
	msg := cutMessage(s.proc, cut)
	b := s.budget(key)
	s.inBackground(func(ctx context.Context) error {
		_, err := s.call(ctx, scriptShareCut, b, []any{msg})
		return err
	})
}

// OnCut implements SeatSharer. The cut last shared on the budget, while
// it is in force (its ProbeAfter has not passed), is applied first: a
// process that starts when the others have learned the limit starts from
// it, rather than drawing a throttle of its own to learn it.
func (s *Store) OnCut(key string, cut func(store.SeatCut)) {
	channel := redisKeys(key)[0]
	s.listen(channel, func(n *notifier) { n.cuts[channel] = append(n.cuts[channel], cut) })
	b := s.budget(key)
	s.inBackground(func(ctx context.Context) error {
		v, err := s.call(ctx, scriptLastCut, b, nil)
		if err != nil {
			return err
		}
		a, _ := v.([]any)
		if len(a) != 2 {
			return nil // none
		}
		msg, _ := a[0].(string)
		age, _ := a[1].(int64)
		c, ok := s.parseCut(msg)
		if ok && time.Duration(age)*time.Microsecond < c.ProbeAfter {
			// The state the others share, cut or rise: this process
			// starts from it.
			c.ProbeAfter -= time.Duration(age) * time.Microsecond
			c.Rise = false
			cut(c)
		}
		return nil
	})
}

// inBackground runs f in a goroutine of the store, with the store's timeout,
// unless the store is closed or in an outage (the others fall back to their
// own budgets meanwhile). A failure of Redis trips the store.
func (s *Store) inBackground(f func(ctx context.Context) error) {
	select {
	case <-s.done:
		return
	default:
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.down.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		if err := f(ctx); err != nil {
			s.trip(err)
		}
	}()
}

// maxCutMillis bounds the probe after of a cut read: a time.Duration.
const maxCutMillis = int64(math.MaxInt64 / time.Millisecond)

// cutMessage returns the message of process proc's cut (see cutPrefix).
func cutMessage(proc string, cut store.SeatCut) string {
	msg := fmt.Sprintf("%s%s:%d:%d:%d", cutPrefix, proc, cut.Limit, cut.Ceiling, cut.ProbeAfter.Milliseconds())
	if cut.Rise {
		msg += riseSuffix
	}
	return msg
}

// parseCut reads the message of another process's cut; ok is false for
// any other message, this process's own cuts included.
func (s *Store) parseCut(msg string) (store.SeatCut, bool) {
	rest, ok := strings.CutPrefix(msg, cutPrefix)
	if !ok {
		return store.SeatCut{}, false
	}
	rest, rise := strings.CutSuffix(rest, riseSuffix)
	f := strings.Split(rest, ":")
	if len(f) != 4 || f[0] == s.proc {
		return store.SeatCut{}, false
	}
	limit, err1 := strconv.Atoi(f[1])
	ceiling, err2 := strconv.Atoi(f[2])
	ms, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit < 1 || ceiling < limit || ms < 0 || ms > maxCutMillis {
		return store.SeatCut{}, false
	}
	return store.SeatCut{Limit: limit, Ceiling: ceiling, ProbeAfter: time.Duration(ms) * time.Millisecond, Rise: rise}, true
}

// ReportSeats implements SeatSharer: every presence interval, when it has
// changed, this process's report goes into the budget's state as field
// s:<process>, which the upkeep of a process that finds it gone deletes.
func (s *Store) ReportSeats(key string, report func() (limit, inUse int)) {
	s.budget(key).report.Store(&report)
}

// reportSeats writes the seats reports that changed since they were last
// written, in one pipeline.
func (s *Store) reportSeats() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	var written []func()
	s.budgets.Range(func(_, v any) bool {
		b := v.(*redisBudget)
		r := b.report.Load()
		if r == nil {
			return true
		}
		limit, inUse := (*r)()
		msg := fmt.Sprintf("%d %d", limit, inUse)
		if last := b.reported.Load(); last != nil && *last == msg {
			return true
		}
		pipe.HSet(ctx, b.keys[2], "s:"+s.proc, msg)
		written = append(written, func() { b.reported.Store(&msg) })
		return true
	})
	if len(written) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for _, w := range written {
		w()
	}
	return nil
}
