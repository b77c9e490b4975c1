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
local asks = ARGV[3] == '1'
ringLoad()
-- The limit the ring grows to; before it exists, the policy's as renew
-- records it.
local limit, moved, shared = ring.limit, false, mixed()
if limit == 0 then limit = hnum('limit') end

-- keep moves the send name from W to the ring, at instant at.
local function keep(name, at)
  if shared then
    call('ZADD', W, at, name)
    return 0
  end
  call('ZREM', W, name)
  ringAdd(at, limit)
  moved = true
  return 0
end

local function record(name, at)
  local s = call('ZSCORE', W, name)
  if not s then return -1 end
  s = tonum(s)
  if s >= at then return keep(name, s) end
  local crowds = #call('ZRANGEBYSCORE', W, num(s + span), '+inf', 'LIMIT', 0, 1) > 0
  if crowds or (asks and hnum('cd') > at) then
    call('ZREM', W, name)
    call('ZADD', W, s, string.sub(name, 2))
    return -2
  end
  return keep(name, at)
end

local out = {}
for i = 4, #ARGV - 1, 2 do
  out[#out + 1] = record(ARGV[i], now + tonum(ARGV[i + 1]))
end
if moved then call('HSET', M, ringFields()) end
return out
