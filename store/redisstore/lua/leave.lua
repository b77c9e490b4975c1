-- This process stops sharing the budget: its presence goes and its
-- reservations still ahead are freed.
local ahead = call('ZRANGEBYSCORE', W, '(' .. num(now), '+inf', 'WITHSCORES')
for i = 1, #ahead, 2 do
  if owner(ahead[i]) == proc then free(ahead[i], tonum(ahead[i + 1])) end
end
call('ZREM', P, proc)
call('HDEL', M, 'e:' .. proc)
return 0
