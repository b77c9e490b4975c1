-- Record sends that slow round trips let go where their requests left
-- (see lag.go). ARGV[3] onwards, per send: how far (µs, 0 or less) the
-- instant its request left lies from now, and an instant (µs) no later
-- than its record. Each moves the earliest of the ring's sends from that
-- instant on (its own, or one earlier still) to where its request left,
-- or adds one there when there is none. Then the reservations the moves
-- crowd move later, each as little as keeps the window. Returns how many
-- moved.
ringLoad()
local limit = ring.limit
if limit == 0 then limit = hnum('limit') end
if limit < 1 then limit = 1 end

-- take removes the earliest of the ring's sends from lo to hi, if any,
-- unless the ring may have dropped sends from lo on: then the one to move
-- may be gone, and a later one must stay.
local function take(lo, hi)
  if ring.n == 0 or ring.l < lo then return end
  if ring.n >= limit and ringRead(0, 1)[1] > lo then return end
  local later = ringAfter(lo - 1)
  if #later == 0 or later[1] > hi then return end
  table.remove(later, 1)
  ringWrite(ring.n - #later - 1, later)
  ring.n = ring.n - 1
  if #later > 0 then
    ring.l = later[#later]
  elseif ring.n > 0 then
    ring.l = ringRead(ring.n - 1, ring.n)[1]
  end
end

local first
for i = 3, #ARGV - 1, 2 do
  local at = now + tonum(ARGV[i])
  take(tonum(ARGV[i + 1]), at)
  ringAdd(at, limit)
  if not first or at < first then first = at end
end
if not first then return 0 end
call('HSET', M, ringFields())

-- The entries of the timespan before the earliest move on, W's and the
-- ring's, in time order, sends first at one instant: each reservation
-- with limit entries within a timespan before it moves later.
local from = first - span
local list = {}
local w = call('ZRANGEBYSCORE', W, '(' .. num(from), '+inf', 'WITHSCORES')
for i = 1, #w, 2 do list[#list + 1] = {name = w[i], at = tonum(w[i + 1]), sent = isSent(w[i])} end
for _, x in ipairs(ringAfter(from)) do list[#list + 1] = {at = x, sent = true} end
table.sort(list, function(x, y)
  if x.at ~= y.at then return x.at < y.at end
  return x.sent and not y.sent
end)
local moved = 0
for j = limit + 1, #list do
  local x = list[j]
  if not x.sent then
    local want = max(list[j - 1].at, list[j - limit].at + span)
    if want > x.at then
      x.at = want
      call('ZADD', W, num(want), x.name)
      if released(x.name) then call('ZADD', F, num(want), x.name) end
      moved = moved + 1
    end
  end
end
return moved
