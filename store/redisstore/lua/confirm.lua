-- Confirm a waiting reservation when its waiter wakes. ARGV[3] member,
-- [4] limit, [5] 1 when this process holds requests in-process (see
-- reserve_window.lua), [6] when it was recorded (µs), [7] linear: the
-- theoretical arrival time after it. Returns the µs left until its slot
-- (0: send now), or -1 when the budget no longer holds it; a late send of
-- a window (below) returns, when [5] is 1, a table of that number and the
-- instants of the L latest entries, in order, so that the process moves
-- the held requests they crowd. (A number costs the server some 4,000
-- instructions less than a table.)
local limit = tonum(ARGV[4])
here(true)
local member, s = current(ARGV[3])

-- A cooldown set since its slot came (its waiter late, or waiting for a
-- seat) holds it back too: nothing is sent while one lasts. heldBack
-- moves a linear reservation to the cooldown's end, and returns its wait
-- then (nil: no cooldown lasts).
local function heldBack()
  local cd = hnum('cd')
  if cd <= now then return nil end
  call('ZADD', W, num(cd), member)
  return cd - now
end

if not s then
  -- A linear reservation a timespan past its slot may have been dropped
  -- by renew; the theoretical arrival time counts it still, so it is sent
  -- now, as if its entry were there. It was dropped for its age, not freed
  -- for a lapse of this process's presence nor lost with the budget
  -- (a restart), when this process has been present since before it was
  -- recorded (see join) and the budget's state has counted it. Otherwise
  -- the process reserves again.
  local at = tonum(ARGV[6])
  if not windowed and at > 0 and at <= now - span then
    local st = call('HMGET', M, 'e:' .. proc, 'tat')
    local since = tonum(st[1])
    if since and since <= at and (tonum(st[2]) or 0) >= tonum(ARGV[7]) then
      return heldBack() or 0
    end
  end
  return -1
end
if s > now then return s - now end
if not windowed then
  local held = heldBack()
  if held then return held end
  call('ZREM', W, member)
  forget(member)
  return 0
end

-- A waiter that woke late: the window must hold on the instant it leaves.
-- That is now (or the cooldown's end), unless requests already sent out of order (later
-- reservations whose waiters confirmed first) leave no room until later:
-- then it waits on, its entry moved there. A send is kept under a name no
-- Confirm or Release matches. The reservations after it that are due but
-- not sent (their waiters late too) come no earlier than it, after it, and
-- every reservation it crowds moves later, as little as keeps the window
-- and the order.
-- The ring's sends (see hot.lua) are sends too: those up to now leave
-- before it, or are sends after it (those later than its slot).
ringLoad()
local old = call('ZRANK', W, member)
local leaving = {}
if old > 0 then
  local e = call('ZRANGE', W, max(old - limit, 0), old - 1, 'WITHSCORES')
  for i = 2, #e, 2 do leaving[#leaving + 1] = tonum(e[i]) end
end
local after = call('ZRANGEBYSCORE', W, num(s), num(now), 'WITHSCORES')
for i = 1, #after, 2 do
  local at = tonum(after[i + 1])
  if isSent(after[i]) and (at > s or after[i] > member) then leaving[#leaving + 1] = at end
end
local later = 0 -- the ring's sends later than now
for _, x in ipairs(ringAfter(s)) do
  if x > now then later = later + 1 end
end
table.sort(leaving, function(x, y) return x > y end)
local t = max(now, hnum('cd'))
local lth = lthOf(leaving, limit, later)
if lth then t = max(t, lth + span) end
-- The entries this moves to an instant sort there, as the memory store
-- keeps them, before those already there, in the order they had: each
-- is renamed 'm' .. a place of this move .. ':' .. its holder (a released
-- slot: .. '~'), the latest move's places first, and M's aliases (see
-- hot.lua) keep the names their holders know.
-- The places of this move are taken when the first entry moves.
local prefix, moves = nil, 0
local function move(m, at)
  local name = m -- a slot freed for a departed process keeps its name
  if string.match(m, '^[rm]') then
    if not prefix then prefix = 'm' .. base36(36 ^ 10 - 1 - call('HINCRBY', M, 'mv', 1), 10) end
    name = prefix .. base36(moves, 4)
    moves = moves + 1
    if released(m) then
      name = name .. '~'
    else
      name = name .. ':' .. owner(m)
      local o = call('HGET', M, 'b:' .. m) or m
      call('HDEL', M, 'b:' .. m)
      call('HSET', M, 'a:' .. o, name, 'b:' .. name, o)
    end
    call('ZREM', W, m)
    if released(m) then call('ZREM', F, m) end
  end
  call('ZADD', W, num(at), name)
  if released(name) then call('ZADD', F, num(at), name) end
  return name
end
local was = member
if t > now then
  member = move(member, t)
else
  call('ZREM', W, member)
  forget(member)
  ringAdd(now, limit)
  call('HSET', M, ringFields())
end
local due = call('ZRANGEBYSCORE', W, num(s), '(' .. num(t), 'WITHSCORES')
for i = 1, #due, 2 do
  local m = due[i]
  -- Only those after it: at its own instant, members sort by name, in
  -- the order they were reserved (see hot.lua).
  if m ~= member and not isSent(m) and (tonum(due[i + 1]) > s or m > was) then move(m, t) end
end
-- The entries from its place on: W's, and the ring's sends later than
-- its slot (those at its slot sort before it, as sends).
local tail = ringAfter(s)
local n = call('ZCARD', W) + #tail
if n <= old + limit then return confirmed(t, member, limit) end
local e = call('ZRANGE', W, old, -1, 'WITHSCORES')
local list = {}
for i = 1, #e, 2 do list[#list + 1] = {name = e[i], at = tonum(e[i + 1]), sent = isSent(e[i]), i = i} end
for _, x in ipairs(tail) do list[#list + 1] = {name = '=', at = x, sent = true, i = 0} end
-- In time order, sends before reservations at the same instant, the late
-- one before those it precedes.
table.sort(list, function(x, y)
  if x.at ~= y.at then return x.at < y.at end
  if x.sent ~= y.sent then return x.sent end
  if (x.name == member) ~= (y.name == member) then return x.name == member end
  return x.i < y.i
end)
for j = 1 + limit, #list do
  local x = list[j]
  if not x.sent then
    local want = max(list[j - 1].at, list[j - limit].at + span)
    if want > x.at then
      x.at = want
      x.name = move(x.name, want)
    end
  end
end
return confirmed(t, member, limit)
