-- Record where requests admitted at once, whose reservations were kept to
-- be confirmed (store.Request.Deferred), really left: after their slots,
-- once they had a seat. Each entry is a send (named '=' and its member)
-- at its slot, which no other Confirm moves. ARGV[3] 1 when a waiter asks
-- whether its request may leave now (a cooldown then holds it back), 0
-- when the requests have left; then, per send, its name and how far (µs)
-- the instant its request left lies from now (0 for a waiter asking).
-- A send moved there, or left at its slot when that is later, goes to
-- the ring (see hot.lua): nothing moves it any more. A name that starts
-- with '-' is that of a leased reservation no request used (see
-- lease.go): it is dropped, code 1.
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

-- Each send moves to the instant it left, or stays at its slot when that
-- is later: into the ring, or, while a process of an earlier version
-- shares the budget, within W, where that version counts it. (Written
-- out rather than as local functions, which every call would make anew.)
local out = {}
for i = 4, #ARGV - 1, 2 do
  local name, at, code = ARGV[i], now + tonum(ARGV[i + 1]), 0
  local s = false
  if string.byte(name) == 45 then -- '-'
    call('ZREM', W, string.sub(name, 2))
    code = 1
  else
    s = call('ZSCORE', W, name)
    if not s then code = -1 end
  end
  if s then
    s = tonum(s)
    if s >= at then
      at = s
    elseif #call('ZRANGEBYSCORE', W, num(s + span), '+inf', 'LIMIT', 0, 1) > 0 or (asks and hnum('cd') > at) then
      call('ZREM', W, name)
      call('ZADD', W, num(s), string.sub(name, 2))
      code = -2
    end
  end
  if code == 0 then
    if shared then
      call('ZADD', W, num(at), name)
    else
      call('ZREM', W, name)
      ringAdd(at, limit)
      moved = true
    end
  end
  out[#out + 1] = code
end
if moved then call('HSET', M, ringFields()) end
return out
