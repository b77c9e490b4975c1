package redisstore

import (
	"context"
	"time"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// UpkeepNow runs the upkeep (lua/upkeep.lua) of every budget s has used,
// as its background does every presence interval for those with waiters.
func UpkeepNow(s *Store) error {
	var budgets []*redisBudget
	var policies []store.Policy
	s.budgets.Range(func(_, v any) bool {
		b := v.(*redisBudget)
		b.mu.Lock()
		budgets, policies = append(budgets, b), append(policies, b.policy)
		b.mu.Unlock()
		return true
	})
	return s.upkeepPipelined(budgets, policies)
}

// ForgetIdle forgets the budgets s no longer uses, as its background does.
func ForgetIdle(s *Store) { s.forgetIdle() }

// BudgetsKept returns how many budgets s keeps state for.
func BudgetsKept(s *Store) int {
	n := 0
	s.budgets.Range(func(any, any) bool { n++; return true })
	return n
}

// PromoteDue records in Redis the held requests of every budget s has used
// whose slots have come within a timespan, as its promotion timer does
// when real time reaches them.
func PromoteDue(s *Store) error {
	var err error
	s.budgets.Range(func(_, v any) bool {
		b := v.(*redisBudget)
		b.mu.Lock()
		defer b.mu.Unlock()
		err = s.promoteDueLocked(context.Background(), b)
		return err == nil
	})
	return err
}

// Advance moves s's view of the Redis server's clock forward by d, for
// tests that cannot wait for real time to pass: every script adds the
// offset to the server's time.
func Advance(s *Store, d time.Duration) { s.offset.Add(int64(d / time.Microsecond)) }

// Now returns s's time as a duration since it was made, on the local clock
// moved by Advance, for tests that turn waits into instants.
func Now(s *Store) time.Duration { return time.Duration(s.localMicros()) * time.Microsecond }

// Member returns the name under which s recorded reservation id of the
// budget key in Redis ("" when s holds none).
func Member(s *Store, key string, id uint64) string {
	b, ok := s.existing(key)
	if !ok {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outstanding[id].member
}

// FlushSent records the sends s was told of (Sent) now, as its background
// does as soon as it can.
func FlushSent(s *Store) { s.flushSent() }

// ParseCut reads a message of s's budget channels as s does: the cut of
// another process, ok false for anything else.
func ParseCut(s *Store, msg string) (store.SeatCut, bool) { return s.parseCut(msg) }

// CutMessage returns the message with which process proc shares cut.
func CutMessage(proc string, cut store.SeatCut) string { return cutMessage(proc, cut) }

// HotScript returns body after lua/hot.lua, as one script, for tests of
// hot.lua's functions on a real Redis.
func HotScript(body string) string { return evalText("", body) }

// HotArgs returns the arguments every script starts with (see
// lua/hot.lua), for process proc on a window budget of the timespan span
// whose presence lasts ttl, with no time offset and no presence refresh.
func HotArgs(proc string, ttl, span time.Duration) []any {
	return []any{hotNumbers(store.Policy{Strategy: store.StrategyWindow, Timespan: span}, ttl, hereNot, 0), proc}
}

// RedisKeys returns the Redis keys of budget key.
func RedisKeys(key string) []string { return redisKeys(key) }

// PastFirstUse makes every budget s has used count its processes every
// presence interval, as it does once its first seconds have passed (see
// countEarly): the steady state, for benchmarks.
func PastFirstUse(s *Store) {
	s.budgets.Range(func(_, v any) bool {
		v.(*redisBudget).born -= micros(earlyFor)
		return true
	})
}

// JoinOver ends the wait of every budget s has joined others on (see
// joinWait), as if it had passed.
func JoinOver(s *Store) {
	s.budgets.Range(func(_, v any) bool {
		v.(*redisBudget).joinUntil.Store(0)
		return true
	})
}

// JoinWait is how long a newcomer to a budget others use takes no seat.
const JoinWait = joinWait

// ParseJoin is parseJoin.
var ParseJoin = parseJoin

// LibraryName is the name of the store's library of functions.
var LibraryName = libraryName
