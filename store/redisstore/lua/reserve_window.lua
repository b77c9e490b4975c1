-- Reserve one slot of a window budget. ARGV[1] packed, after the numbers
-- every script takes (see hot.lua), as big-endian doubles: the limit, the
-- max wait (µs), the jitter (µs), how many requests of this process wait
-- in-process before it, how far ahead (µs) a reservation may be recorded,
-- the latest slot given to those held requests before jitter (0: none),
-- j, the rank among the held slots of the latest in ARGV[4] (0: none
-- held), the estimated slot of the held request being recorded (0:
-- none), its slot before jitter, 1 when a request admitted at once is
-- sent without a Confirm, 2 when it is kept
-- to be confirmed by Sent (store.Request.Deferred), 0 for a held request
-- being recorded, whose waiter confirms, and 1 when that held request was
-- released (its slot is recorded as released). [3] the reservation's
-- member, [4] (when requests are held) the j-th to the min(held, L)-th
-- latest slots of the held requests, latest first, separated by spaces.
-- Returns (see answer in hot.lua) the status, the wait (µs), whether a
-- cooldown lasts, now (µs), the slot before jitter (µs, as mark and as
-- base), the name recorded, and the processes and rank when counted:
-- status 0 refused, 1 recorded, 2 to be held in-process (nothing
-- recorded). The name is
-- the member's unless it claimed a released slot (see hot.lua).
local limit, maxwait, jit, held, horizon, heldFloor, heldFirst, est, estBase, atOnce, released = sunpack('>ddddddddddd', ARGV[1], 41)
local member = ARGV[3]
-- A request admitted at once is recorded as a send (see sendName), but a
-- held request being recorded, whose waiter confirms.
local sends = atOnce ~= 0

local st = call('HMGET', M, 'cd', 'nf', 'hot')
local cd = 0
if st[1] then cd = tonum(st[1]) or 0 end
ringOf(st[3])
-- (Each call of a function costs a decision some 600 instructions: those
-- that would only return are not made.)
if ring.ren <= now then renew(ring.ren, cd, limit) end
local procs = -1
if refresh == 1 then procs = here(false) end
-- W's latest entries, up to limit. Those a timespan past count for
-- nothing; they go when they are among them, or W holds more. The
-- placeholder at 0 (see renew) is always the earliest, and alone, which
-- ZCARD tells at a third of the cost, constrains nothing. With fewer
-- entries in W, the ring and the held slots together than the limit,
-- there is no L-th latest: only W's oldest is read, to drop the stale.
local w, nw = none, call('ZCARD', W)
if nw > 1 then
  local oldest, full
  if nw + ring.n + held < limit then
    local o = call('ZRANGE', W, 0, 1, 'WITHSCORES')
    oldest = tonum(o[2])
    if oldest == 0 then oldest = tonum(o[4]) end
  else
    w = call('ZREVRANGE', W, 0, limit - 1, 'WITHSCORES')
    oldest, full = tonum(w[#w]), #w == 2 * limit
    if oldest == 0 and #w >= 4 then oldest = tonum(w[#w - 2]) end
  end
  if full or (oldest > 0 and oldest <= now - span) then
    call('ZREMRANGEBYSCORE', W, '(0', num(now - span))
  end
end
local cooling = 0
if cd > now then cooling = 1 end
local last = ring.last
local t0 = now
if cd > t0 then t0 = cd end
if last > t0 then t0 = last end

-- The earliest instant for the request, after the held ones: no earlier
-- than the L-th latest send plus one span, nor than the latest slot given.
local slot = t0
if heldFloor > slot then slot = heldFloor end
local after = 0 -- the L-th latest instant plus one span
if held == 0 then
  local ws = none
  if #w > 0 then
    ws = {}
    for k = 2, #w, 2 do ws[k / 2] = tonum(w[k]) end
  end
  -- With fewer entries than the limit, there is no L-th latest.
  if #ws + ring.n >= limit then
    local lth = lthOf(ws, limit, 0)
    if lth then after = lth + span end
  end
else
  -- The L-th latest of the recorded instants (R) and the held slots (H),
  -- R_i and H_j being the i-th and j-th latest, is the latest of
  -- min(H_j, R_(L-j)) over j (R_0 is +inf). For the ranks j below those
  -- given, R_(L-first+1) bounds it from above: taken then, it can only
  -- delay the request.
  local hs = {}
  for x in string.gmatch(ARGV[4], '%d+') do hs[#hs + 1] = tonum(x) end
  local last = heldFirst + #hs - 1
  local lo, hi = max(limit - last, 1), limit - heldFirst + 1
  local r = unionLatest(w, hi)
  local lth = r[hi]
  for j = heldFirst, last do
    local h, i = hs[j - heldFirst + 1], limit - j
    if i == 0 or r[i] then
      if i > 0 then h = min(h, r[i]) end
      if not lth or h > lth then lth = h end
    end
  end
  if lth then after = lth + span end
end
if after > slot then slot = after end

-- A held request keeps the slot it was estimated, jitter and all, as if
-- it had been recorded then: where what was recorded since leaves room for
-- it there, it is recorded there, even if that has come already (its
-- waiter's Confirm then moves it to when it really leaves). It claims no
-- released slot: reservations already queued keep theirs.
if est > 0 and est >= cd and est >= after then
  if released == 1 then
    call('ZADD', W, num(est), freedName(member))
    call('ZADD', F, num(est), freedName(member))
    call('HINCRBY', M, 'nf', 1)
  else
    call('ZADD', W, num(est), member)
    if est > now then here(true) end
  end
  ring.last = max(last, estBase)
  call('HSET', M, ringFields())
  return answer(1, max(est - now, 0), cooling, estBase, procs, estBase, member)
end

-- A released slot between the cooldown's end and that instant is claimed.
local nf = 0
if st[2] and st[2] ~= '0' then nf = tonum(st[2]) end
local at, claimed
if nf > 0 then at, claimed = claim(nf, max(now, cd), slot, member, maxwait, sends) end
if at then
  if at - now > maxwait then return answer(0, at - now, cooling, at, procs, at, member) end
  return answer(1, at - now, cooling, at, procs, at, claimed)
end

local base, wait = slot, slot - now
if wait > 0 then
  slot = slot + jitter(wait, jit, maxwait)
  wait = slot - now
end
if wait > maxwait then return answer(0, wait, cooling, base, procs, base, member) end
if wait > 0 and (held > 0 or wait > horizon) then return answer(2, wait, cooling, base, procs, base, member) end
if wait <= 0 and atOnce == 1 then
  ringAdd(slot, limit)
  ring.last = base
  call('HSET', M, ringFields())
  return answer(1, wait, cooling, base, procs, base, member)
end
call('ZADD', W, num(slot), sendName(member, wait, sends))
ring.last = base
call('HSET', M, ringFields())
if wait > 0 then here(true) end
return answer(1, wait, cooling, base, procs, base, member)
