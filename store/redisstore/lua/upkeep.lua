-- The upkeep of a budget on which this process has requests waiting, run
-- every presence interval: refresh its presence, and give the slots of
-- departed processes to the waiters after them. Returns {the number of
-- processes sharing the budget, this process's rank among them}.
local n = presence()
return {n, rank}
