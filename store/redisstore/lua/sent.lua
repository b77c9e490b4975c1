-- Record where requests admitted at once, whose reservations were kept to
-- be confirmed (store.Request.Deferred), really left: after their slots,
-- once they had a seat. Each entry is a send (named '=' and its member)
-- at its slot, which no other Confirm moves. ARGV[3] 1 when a waiter asks
-- whether its request may leave now (a cooldown then holds it back), 0
-- when the requests have left; then, per send, its name and how far (µs)
-- the instant its request left lies from now (0 for a waiter asking).
-- A send moved there, or left at its slot when that is later, goes to
-- the ring (see hot.lua): nothing moves it any more.
-- Returns a code per send: 0 when moved to that instant, -1 when the
-- budget no longer holds it, -2 when moving it could crowd a reservation a
-- timespan after its slot (or, when asked, a cooldown lasts): it is then a
-- waiting reservation again, under its member's name, for confirm.lua.
-- When no code is below 0, it returns 0 alone: a number costs the server
-- some 4,000 instructions less than a table.
local asks = ARGV[3] == '1'
ringLoad()
-- The limit the ring grows to; before it exists, the policy's as renew
-- records it.
local limit = ring.limit
if limit == 0 then limit = hnum('limit') end

-- The entries' scores, read at once; no entry is named twice.
local names, out = {}, {}
for i = 4, #ARGV - 1, 2 do
  names[#names + 1] = ARGV[i]
  out[#out + 1] = 0
end
local scores = none
if #names > 0 then scores = call('ZMSCORE', W, unpack(names)) end

-- Each send moves to the instant it left, or stays at its slot when that
-- is later: into the ring. Those that leave W go in one ZREM (gone), and into the ring all at once (ats),
-- after the loop; a read of W in the loop removes them first. Moved, a
-- send may crowd a reservation a timespan after its slot: when no entry
-- of W lies a timespan after the earliest slot of those that move (one
-- read, before any has moved), none does, and W gains no such entry
-- meanwhile unless sends move within it. (Written out rather than as
-- local functions, which every call would make anew.)
local lefts, early = {}, nil
for k = 1, #names do
  local at, s = now + tonum(ARGV[3 + 2 * k]), scores[k]
  lefts[k] = at
  if s then
    s = tonum(s)
    if s < at and (not early or s < early) then early = s end
  end
  scores[k] = s
end
local clear = true
if early then
  clear = #call('ZRANGEBYSCORE', W, num(early + span), '+inf', 'LIMIT', 0, 1) == 0
end
local gone, ats = {}, {}
local kept = false -- whether a code is below 0
for k = 1, #names do
  local name, at, s, code = names[k], lefts[k], scores[k], out[k]
  if not s then code = -1 end
  if s then
    if s >= at then
      at = s
    else
      local crowds = false
      if not clear then
        if #gone > 0 then
          call('ZREM', W, unpack(gone))
          gone = {}
        end
        crowds = #call('ZRANGEBYSCORE', W, num(s + span), '+inf', 'LIMIT', 0, 1) > 0
      end
      if crowds or (asks and hnum('cd') > at) then
        call('ZREM', W, name)
        call('ZADD', W, num(s), string.sub(name, 2))
        code = -2
      end
    end
  end
  if code == 0 then
    gone[#gone + 1] = name
    ats[#ats + 1] = at
  end
  out[k] = code
  if code < 0 then kept = true end
end
if #gone > 0 then call('ZREM', W, unpack(gone)) end
if #ats > 0 then
  ringAddMany(ats, limit)
  call('HSET', M, ringFields())
end
if not kept then return 0 end
return out
