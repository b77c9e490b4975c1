package store

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
