-- Refresh this process's presence; returns the processes sharing the budget.
local n = presence()
redis.call('PEXPIRE', P, math.ceil(ttl / 1000) + 1000)
return n
