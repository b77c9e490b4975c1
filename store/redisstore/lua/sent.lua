-- Record where a request admitted at once, whose reservation was kept to
-- be confirmed (store.Request.Deferred), really left: after its slot, once
-- it had a seat. Its entry is a send (named '=' and its member) at its
-- slot, which no other Confirm moves. ARGV[7] that name, [8] 1 when its
-- waiter asks whether it may leave now (a cooldown then holds it back), 0
-- when it has left (the script's time is then set back to when it did;
-- see sent.go). Returns {0} when moved to now, {-1} when the budget no
-- longer holds it, {-2} when moving it could crowd a reservation a
-- timespan after its slot (or, when asked, a cooldown lasts): it is then a
-- waiting reservation again, under its member's name, for confirm.lua.
local name = ARGV[7]
local s = redis.call('ZSCORE', W, name)
if not s then return {-1} end
s = tonumber(s)
if s >= now then return {0} end
local crowds = #redis.call('ZRANGEBYSCORE', W, num(s + span), '+inf', 'LIMIT', 0, 1) > 0
if crowds or (ARGV[8] == '1' and hnum('cd') > now) then
  redis.call('ZREM', W, name)
  redis.call('ZADD', W, s, string.sub(name, 2))
  return {-2}
end
redis.call('ZADD', W, now, name)
return {0}
