-- Read the budget without changing it: returns {cooldown left µs,
-- processes sharing it, waiting reservations, sends in the last span,
-- limit, span µs, strategy}.
local cd = hnum('cd')
local live = redis.call('ZCOUNT', P, '(' .. num(now), '+inf')
local length = hnum('span')
local strategy = redis.call('HGET', M, 'strategy') or ''
local waiting = redis.call('ZCOUNT', W, '(' .. num(now), '+inf')
local used = 0
if strategy == 'window' then
  waiting = waiting - redis.call('ZCOUNT', F, '(' .. num(now), '+inf')
  used = redis.call('ZCOUNT', W, '(' .. num(now - length), num(now))
end
return {math.max(cd - now, 0), live, waiting, used, hnum('limit'), length, strategy}
