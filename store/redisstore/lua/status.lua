-- Read the budget without changing it: returns {cooldown left µs,
-- processes sharing it, waiting reservations, sends in the last span,
-- limit, span µs, strategy, concurrency limit, seats in use}; the last two
-- from the live processes' seats reports (0 when none reports).
local cd = hnum('cd')
local live = call('ZCOUNT', P, '(' .. num(now), '+inf')
local length = hnum('span')
local strategy = call('HGET', M, 'strategy') or ''
local waiting = call('ZCOUNT', W, '(' .. num(now), '+inf')
local used = 0
if strategy == 'window' then
  waiting = waiting - call('ZCOUNT', F, '(' .. num(now), '+inf')
  used = call('ZCOUNT', W, '(' .. num(now - length), num(now))
  ringLoad()
  for _, x in ipairs(ringAfter(now - length)) do
    if x <= now then used = used + 1 end
  end
end
local seatLimit, inUse = 0, 0
for _, p in ipairs(call('ZRANGEBYSCORE', P, '(' .. num(now), '+inf')) do
  local r = call('HGET', M, 's:' .. p)
  if r then
    local l, u = string.match(r, '^(%d+) (%d+)$')
    if l then
      seatLimit = max(seatLimit, tonum(l))
      inUse = inUse + tonum(u)
    end
  end
end
return {max(cd - now, 0), live, waiting, used, hnum('limit'), length, strategy, seatLimit, inUse}
