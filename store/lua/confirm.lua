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
-- waiter that woke late sends now: the window must hold on that instant.
-- The reservations after it that are due but not sent (their waiters late
-- too) come no earlier than now, after it, and every reservation its late
-- send crowds moves later, as little as keeps the window and the order.
local old = redis.call('ZRANK', W, member)
redis.call('ZREM', W, member)
redis.call('ZADD', W, now, '=' .. member)
if s == now then return 0 end
local function sent(m)
  local c = string.sub(m, 1, 1)
  return c == '=' or c == '!'
end
local due = redis.call('ZRANGEBYSCORE', W, num(s), '(' .. num(now), 'WITHSCORES')
for i = 1, #due, 2 do
  local m = due[i]
  -- Only those after it: at its own instant, members sort by name.
  if not sent(m) and (tonumber(due[i + 1]) > s or m > member) then
    redis.call('ZADD', W, now, m)
    if string.sub(m, 1, 1) == '~' then redis.call('ZADD', F, now, m) end
  end
end
local n = redis.call('ZCARD', W)
if n <= old + limit then return 0 end
local lo = math.max(old - limit, 0)
local e = redis.call('ZRANGE', W, lo, -1, 'WITHSCORES')
local list = {}
for i = 1, #e, 2 do list[#list + 1] = {name = e[i], at = tonumber(e[i + 1]), sent = sent(e[i]), i = i} end
-- In time order, sends before reservations at the same instant.
table.sort(list, function(x, y)
  if x.at ~= y.at then return x.at < y.at end
  if x.sent ~= y.sent then return x.sent end
  return x.i < y.i
end)
for j = old - lo + 1 + limit, #list do
  local x = list[j]
  if not x.sent then
    local want = math.max(list[j - 1].at, list[j - limit].at + span)
    if want > x.at then
      x.at = want
      redis.call('ZADD', W, want, x.name)
      if string.sub(x.name, 1, 1) == '~' then redis.call('ZADD', F, want, x.name) end
    end
  end
end
return 0
