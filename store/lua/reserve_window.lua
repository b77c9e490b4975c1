-- Reserve one slot of a window budget. ARGV[5] limit, [6] span (µs),
-- [7] max wait (µs), [8] jitter (µs), [9] the reservation's member,
-- [10] how many requests of this process wait in-process before it,
-- [11] how far ahead (µs) a reservation may be recorded, [12] the latest
-- slot given to those held requests before jitter (0: none), [13] the
-- slot of the held request that is the L-th latest before this one (-1:
-- it is recorded in Redis).
-- Returns {status, wait µs, cooling 0/1, processes, now µs, base µs}:
-- status 0 refused, 1 recorded, 2 to be held in-process (nothing recorded).
local limit, span = tonumber(ARGV[5]), tonumber(ARGV[6])
local maxwait, jit = tonumber(ARGV[7]), tonumber(ARGV[8])
local member, held, horizon = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])
local heldFloor, heldLth = tonumber(ARGV[12]), tonumber(ARGV[13])

local procs = presence()
redis.call('ZREMRANGEBYSCORE', W, '-inf', num(now - span))
redis.call('ZREMRANGEBYSCORE', F, '-inf', '(' .. num(now))
local cd = hnum('cd')
local cooling = 0
if cd > now then cooling = 1 end
local t0 = math.max(now, cd)
t0 = math.max(t0, hnum('last'))

-- The earliest instant for the request, after the held ones: no earlier
-- than the L-th latest send plus one span, nor than the latest slot given.
local slot = math.max(t0, heldFloor)
if heldLth >= 0 then
  slot = math.max(slot, heldLth + span)
else
  local g = redis.call('ZCARD', W) + held - limit
  if g >= 0 then
    local e = redis.call('ZRANGE', W, g, g, 'WITHSCORES')
    slot = math.max(slot, tonumber(e[2]) + span)
  end
end

-- A released slot between the cooldown's end and that instant is claimed.
local freed = redis.call('ZRANGEBYSCORE', F, num(math.max(now, cd)), num(slot), 'WITHSCORES', 'LIMIT', 0, 1)
if #freed > 0 then
  local at = tonumber(freed[2])
  if at - now > maxwait then return {0, at - now, cooling, procs, now, at} end
  redis.call('ZREM', F, freed[1])
  redis.call('ZREM', W, freed[1])
  redis.call('ZADD', W, at, member)
  return {1, at - now, cooling, procs, now, at}
end

local base, wait = slot, slot - now
if wait > 0 then
  slot = slot + jitter(wait, jit, maxwait)
  wait = slot - now
end
if wait > maxwait then return {0, wait, cooling, procs, now, base} end
if wait > 0 and (held > 0 or wait > horizon) then return {2, wait, cooling, procs, now, base} end
redis.call('ZADD', W, slot, member)
redis.call('HSET', M, 'last', base, 'limit', limit, 'span', span, 'strategy', 'window')
expire(span)
return {1, wait, cooling, procs, now, base}
