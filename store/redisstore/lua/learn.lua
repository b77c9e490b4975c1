-- Record the sends this process made while Redis could not be asked (an
-- outage), at their instants, so that the window counts them: ARGV[3] k,
-- then instants, µs of the Redis server's clock as this process estimated
-- it, of its sends in the last timespan, the first k of them from before
-- the outage. Those are recorded too when the budget's state is gone (a
-- Redis that restarted empty). Instants already past the window are left
-- out. Returns the number recorded.
local k = tonum(ARGV[3])
local first = 4 + k
if call('EXISTS', M) == 0 then first = 4 end
renew(hnum('ren'), hnum('cd'), nil)
local n, recorded = hnum('learned'), 0
for i = first, #ARGV do
  local at = tonum(ARGV[i])
  if at > now - span then
    n = n + 1
    recorded = recorded + 1
    call('ZADD', W, num(at), '=' .. proc .. ':o' .. n)
  end
end
call('HSET', M, 'learned', n)
return recorded
