-- Reserve one slot of a window budget. ARGV[7] limit, [8] max wait (µs),
-- [9] jitter (µs), [10] the reservation's member, [11] how many requests
-- of this process wait in-process before it, [12] how far ahead (µs) a
-- reservation may be recorded, [13] the latest slot given to those held
-- requests before jitter (0: none), [14] the slot of the held request that
-- is the L-th latest before this one (-1: it is recorded in Redis), [15]
-- 1 when a request admitted at once is sent without a Confirm (0 for a
-- held request being recorded, whose waiter confirms).
-- Returns {status, wait µs, cooling 0/1, now µs, base µs, processes, rank}:
-- status 0 refused, 1 recorded, 2 to be held in-process (nothing
-- recorded); processes and rank -1 when not counted.
local limit, maxwait, jit = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local member, held, horizon = ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12])
local heldFloor, heldLth = tonumber(ARGV[13]), tonumber(ARGV[14])
-- A send admitted at once is recorded under the name of a send: a late
-- waiter's Confirm never moves it.
local function named(wait)
  if wait <= 0 and ARGV[15] == '1' then return '=' .. member end
  return member
end

local st = redis.call('HMGET', M, 'cd', 'last', 'nf', 'ren')
local cd = tonumber(st[1]) or 0
renew(tonumber(st[4]) or 0, cd, limit)
local procs = here(false)
redis.call('ZREMRANGEBYSCORE', W, '(0', num(now - span))
local cooling = 0
if cd > now then cooling = 1 end
local t0 = math.max(now, cd, tonumber(st[2]) or 0)

-- The earliest instant for the request, after the held ones: no earlier
-- than the L-th latest send plus one span, nor than the latest slot given.
local slot = math.max(t0, heldFloor)
if heldLth >= 0 then
  slot = math.max(slot, heldLth + span)
else
  local e = redis.call('ZRANGE', W, held - limit, held - limit, 'WITHSCORES')
  if #e > 0 then slot = math.max(slot, tonumber(e[2]) + span) end
end

-- A released slot between the cooldown's end and that instant is claimed.
local at = claim(tonumber(st[3]) or 0, math.max(now, cd), slot, member, maxwait, named)
if at then
  if at - now > maxwait then return {0, at - now, cooling, now, at, procs, rank} end
  return {1, at - now, cooling, now, at, procs, rank}
end

local base, wait = slot, slot - now
if wait > 0 then
  slot = slot + jitter(wait, jit, maxwait)
  wait = slot - now
end
if wait > maxwait then return {0, wait, cooling, now, base, procs, rank} end
if wait > 0 and (held > 0 or wait > horizon) then return {2, wait, cooling, now, base, procs, rank} end
redis.call('ZADD', W, slot, named(wait))
redis.call('HSET', M, 'last', base)
if wait > 0 then here(true) end
return {1, wait, cooling, now, base, procs, rank}
