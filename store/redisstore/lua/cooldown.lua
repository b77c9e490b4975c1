-- Extend the budget's cooldown to now + ARGV[3] (µs) and move every
-- outstanding reservation later by the same amount, so that the earliest
-- starts no sooner than its end. Returns {µs left, µs every reservation
-- moved, now µs}.
local until_ = now + tonum(ARGV[3])
presence()
local cd = hnum('cd')
if until_ <= cd then return {cd - now, 0, now} end
call('HSET', M, 'cd', num(until_))
-- Every process's waiters look again: those whose slots are moved, and
-- those admitted already that wait for a seat, which the cooldown holds
-- back too.
call('PUBLISH', W, 'moved')
local ahead = call('ZRANGEBYSCORE', W, '(' .. num(now), '+inf', 'WITHSCORES')
local freed = call('ZRANGEBYSCORE', F, '(' .. num(now), '+inf', 'WITHSCORES')
local earliest, delta = nil, 0
if #ahead > 0 then earliest = tonum(ahead[2]) end
if #freed > 0 and (not earliest or tonum(freed[2]) < earliest) then earliest = tonum(freed[2]) end
if earliest and earliest < until_ then
  delta = until_ - earliest
  for i = 1, #ahead, 2 do call('ZADD', W, num(tonum(ahead[i + 1]) + delta), ahead[i]) end
  for i = 1, #freed, 2 do call('ZADD', F, num(tonum(freed[i + 1]) + delta), freed[i]) end
  local tat = hnum('tat')
  if tat > now then call('HSET', M, 'tat', tat + delta) end
  if windowed and ringLoad().last > now then
    ring.last = ring.last + delta
    call('HSET', M, ringFields())
  end
end
renew(0, until_, nil)
return {until_ - now, delta, now}
