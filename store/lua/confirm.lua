-- Confirm a waiting reservation when its waiter wakes. ARGV[7] member,
-- [8] limit. Returns the µs left until its slot (0: send
-- now), or -1 when the budget no longer holds it.
local member, limit = ARGV[7], tonumber(ARGV[8])
here(true)
local s = redis.call('ZSCORE', W, member)
if not s then return -1 end
s = tonumber(s)
if s > now then return s - now end
if not windowed then
  redis.call('ZREM', W, member)
  return 0
end

-- A window keeps the send, under a name no Confirm or Release matches. A
-- waiter that woke late sends now: the window must hold on that instant,
-- so the reservations its late send crowds move later, as little as keeps
-- the window and the order.
local old = redis.call('ZRANK', W, member)
redis.call('ZREM', W, member)
redis.call('ZADD', W, now, '=' .. member)
local n = redis.call('ZCARD', W)
if s == now or n <= old + limit then return 0 end
local e = redis.call('ZRANGE', W, old, -1, 'WITHSCORES')
local at, names = {}, {}
for i = 1, #e, 2 do
  names[#names + 1] = e[i]
  at[#at + 1] = tonumber(e[i + 1])
end
for j = limit + 1, #at do
  if at[j] > now then
    local want = math.max(at[j - 1], at[j - limit] + span)
    if want > at[j] then
      at[j] = want
      redis.call('ZADD', W, want, names[j])
      if string.sub(names[j], 1, 1) == '~' then redis.call('ZADD', F, want, names[j]) end
    end
  end
end
return 0
