-- Reserve one slot of a linear budget (GCRA). ARGV[1] packed, after the
-- numbers every script takes (see hot.lua), as big-endian doubles: the
-- limit, the max wait (µs), the jitter (µs), how many requests of this
-- process wait in-process before it, how far ahead (µs) a reservation may
-- be recorded, the theoretical arrival time after those held requests (0:
-- none), the interval (µs), the burst allowance tau (µs), the estimated
-- slot of the held request being recorded (0: none), the theoretical
-- arrival time after it, and 1 when that held request was released (its
-- slot is recorded as released). [3] the reservation's member.
-- Returns as reserve_window, with the theoretical arrival time after this
-- request (the mark) and its slot before jitter (the base).
local limit, maxwait, jit, held, horizon, heldTat, interval, tau, est, estTat, released = sunpack('>ddddddddddd', ARGV[1], 41)
local member = ARGV[3]

local st = call('HMGET', M, 'cd', 'tat', 'nf', 'ren')
local cd = tonum(st[1]) or 0
renew(tonum(st[4]) or 0, cd, limit)
local procs = here(false)
local cooling = 0
if cd > now then cooling = 1 end
local t0 = max(now, cd)
-- The held requests come after those recorded, one interval each; heldTat
-- already counts them.
local tat = max((tonum(st[2]) or 0) + held * interval, heldTat)
local slot = max(t0, tat - tau)

-- A held request keeps the slot it was estimated, jitter and all, where
-- what was recorded since leaves room for it there (see reserve_window).
if est > 0 and est >= cd and est >= tat - tau then
  if released == 1 then
    call('ZADD', F, num(est), freedName(member))
    call('HINCRBY', M, 'nf', 1)
  elseif est > now then
    call('ZADD', W, num(est), member)
    here(true)
  end
  local after = max(estTat, max(tat, est) + interval)
  call('HSET', M, 'tat', after)
  return answer(1, max(est - now, 0), cooling, after, procs, est, member)
end

local at, claimed = claim(tonum(st[3]) or 0, t0, slot, member, maxwait)
if at then
  if at - now > maxwait then return answer(0, at - now, cooling, tat, procs, at, member) end
  return answer(1, at - now, cooling, tat, procs, at, claimed)
end

local wait, j = slot - now, 0
if wait > 0 then
  j = jitter(wait, jit, maxwait)
  slot = slot + j
  wait = wait + j
end
if wait > maxwait then return answer(0, wait, cooling, tat, procs, slot - j, member) end
local after = max(tat, t0) + interval + j
if wait > 0 and (held > 0 or wait > horizon) then return answer(2, wait, cooling, after, procs, slot - j, member) end
if wait > 0 then
  call('ZADD', W, num(slot), member)
  here(true)
end
call('HSET', M, 'tat', after)
return answer(1, wait, cooling, after, procs, slot - j, member)
