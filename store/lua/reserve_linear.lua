-- Reserve one slot of a linear budget (GCRA). ARGV[5] limit, [6] span
-- (µs), [7] max wait (µs), [8] jitter (µs), [9] the reservation's member,
-- [10] how many requests of this process wait in-process before it,
-- [11] how far ahead (µs) a reservation may be recorded, [12] the
-- theoretical arrival time after those held requests (0: none), [13]
-- interval (µs), [14] burst allowance tau (µs).
-- Returns {status, wait µs, cooling 0/1, processes, now µs, tat µs}: as
-- reserve_window, with the theoretical arrival time after this request.
local limit, span = tonumber(ARGV[5]), tonumber(ARGV[6])
local maxwait, jit = tonumber(ARGV[7]), tonumber(ARGV[8])
local member, held, horizon = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])
local heldTat, interval, tau = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])

local procs = presence()
redis.call('ZREMRANGEBYSCORE', W, '-inf', num(now - span))
redis.call('ZREMRANGEBYSCORE', F, '-inf', '(' .. num(now))
local cd = hnum('cd')
local cooling = 0
if cd > now then cooling = 1 end
local t0 = math.max(now, cd)
local tat = math.max(hnum('tat'), heldTat)
local slot = math.max(t0, tat + held * interval - tau)

local freed = redis.call('ZRANGEBYSCORE', F, num(t0), num(slot), 'WITHSCORES', 'LIMIT', 0, 1)
if #freed > 0 then
  local at = tonumber(freed[2])
  if at - now > maxwait then return {0, at - now, cooling, procs, now, tat} end
  redis.call('ZREM', F, freed[1])
  if at > now then redis.call('ZADD', W, at, member) end
  return {1, at - now, cooling, procs, now, tat}
end

local wait, j = slot - now, 0
if wait > 0 then
  j = jitter(wait, jit, maxwait)
  slot = slot + j
  wait = wait + j
end
if wait > maxwait then return {0, wait, cooling, procs, now, tat} end
local after = math.max(tat, t0) + interval + j
if wait > 0 and (held > 0 or wait > horizon) then return {2, wait, cooling, procs, now, after} end
redis.call('HSET', M, 'tat', after, 'limit', limit, 'span', span, 'strategy', 'linear')
if wait > 0 then redis.call('ZADD', W, slot, member) end
expire(span)
return {1, wait, cooling, procs, now, after}
