package store

import "context"

// UpkeepNow runs the upkeep (lua/upkeep.lua) of every budget s has used,
// as its background does every presence interval for those with waiters.
func UpkeepNow(s *Redis) error {
	var budgets []*redisBudget
	var policies []Policy
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
func ForgetIdle(s *Redis) { s.forgetIdle() }

// BudgetsKept returns how many budgets s keeps state for.
func BudgetsKept(s *Redis) int {
	n := 0
	s.budgets.Range(func(any, any) bool { n++; return true })
	return n
}

// PromoteDue records in Redis the held requests of every budget s has used
// whose slots have come within a timespan, as its promotion timer does
// when real time reaches them.
func PromoteDue(s *Redis) error {
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
