package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

var _ store.SeatSharer = (*Store)(nil)

// SeatShare implements SeatSharer from the processes last counted sharing
// the budget (every few seconds of use, and at every upkeep) and this
// process's rank among them by name.
func (s *Store) SeatShare(key string, limit int) (share, processes int) {
	b, ok := s.existing(key)
	if !ok {
		return max(limit, 1), 1
	}
	n := int(max(b.procs.Load(), 1))
	share = limit / n
	if int(b.rank.Load()) < limit%n {
		share++
	}
	return max(share, 1), n
}

// cutPrefix starts the message of a cut on a budget's channel:
// "cut:<process>:<limit>:<ceiling>:<probe after, ms>".
const cutPrefix = "cut:"

// ShareCut implements SeatSharer: one PUBLISH on the budget's channel, no
// state kept in Redis (a process that starts later learns the limit by its
// own slow start).
func (s *Store) ShareCut(key string, cut store.SeatCut) {
	msg := fmt.Sprintf("%s%s:%d:%d:%d", cutPrefix, s.proc, cut.Limit, cut.Ceiling, cut.ProbeAfter.Milliseconds())
	channel := redisKeys(key)[0]
	select {
	case <-s.done:
		return
	default:
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.down.Load() {
			return // The others fall back to their own budgets meanwhile.
		}
		ctx, cancel := context.WithTimeout(s.background(), s.opts.Timeout)
		defer cancel()
		if err := s.client.Publish(ctx, channel, msg).Err(); err != nil {
			s.trip(err)
		}
	}()
}

// OnCut implements SeatSharer.
func (s *Store) OnCut(key string, cut func(store.SeatCut)) {
	channel := redisKeys(key)[0]
	s.listen(channel, func(n *notifier) { n.cuts[channel] = append(n.cuts[channel], cut) })
}

// parseCut reads the message of another process's cut; ok is false for
// any other message, this process's own cuts included.
func (s *Store) parseCut(msg string) (store.SeatCut, bool) {
	rest, ok := strings.CutPrefix(msg, cutPrefix)
	if !ok {
		return store.SeatCut{}, false
	}
	f := strings.Split(rest, ":")
	if len(f) != 4 || f[0] == s.proc {
		return store.SeatCut{}, false
	}
	limit, err1 := strconv.Atoi(f[1])
	ceiling, err2 := strconv.Atoi(f[2])
	ms, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit < 1 || ceiling < limit || ms < 0 {
		return store.SeatCut{}, false
	}
	return store.SeatCut{Limit: limit, Ceiling: ceiling, ProbeAfter: time.Duration(ms) * time.Millisecond}, true
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
	ctx, cancel := context.WithTimeout(s.background(), s.opts.Timeout)
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
