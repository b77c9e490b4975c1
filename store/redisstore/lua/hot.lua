-- Shared by every script. KEYS: the budget's entries (W: the waiting
-- reservations, and the sends a Confirm or a Sent may still move or that
-- have names, of a window; the waiting reservations of a linear budget),
-- its freed slots (F), its state (M), the presence of the processes
-- sharing it (P) and the other sends of a window (S, see the ring below).
-- All five carry the budget key in a hash tag: one Cluster slot.
-- ARGV[1] packed, as big-endian doubles: the time offset (µs, 0 outside
-- tests), 1 for a window budget, how long this process's presence lasts
-- (µs), the timespan (µs), whether to refresh this process's presence: 1
-- yes, and count the processes (every few seconds per budget); 2 only if
-- this call records a reservation ahead (when the presence may be
-- lapsing); 0 no; then a reserve's own numbers. [2] this process's name.
-- Then each script's own.
-- (Numbers cost a script far less packed than as text, and each argument
-- costs one Lua string.)
-- Times are µs of the Redis server's clock, never a client's.
--
-- The scripts are the functions of one library (see scripts.go): what
-- this file and prelude.lua define is made once, when the library loads,
-- and each call starts with begin, which sets the call's state below.
-- Where the server refuses functions, each script runs as one EVAL of
-- the same code, begin first.
--
-- The scripts a request runs (reserve, confirm, release) are kept to a few
-- commands; what keeps the budget tidy runs rarely: renew, at most every
-- renewEvery, and the upkeep of upkeep.lua while this process has
-- requests waiting.
local KEYS, ARGV, W, F, M, P, S
local windowed, proc, ttl, span, now, renewEvery

-- refresh is ARGV[1]'s presence flag (see above).
local refresh

-- rank is this process's place among the live processes sharing the
-- budget, in the order of their names, when counted (-1: not counted): it
-- decides which of them take the seats of a concurrency limit that does
-- not divide evenly.
local rank

-- ring is the ring of sends as read (see the ring below), and loaded
-- whether this call has read it: one table, kept from call to call, so
-- that reading the ring makes none. none is an empty table, never
-- written, for the same reason.
local ring, loaded, none = {}, false, {}

-- The functions the scripts use most, kept as locals: a library's global
-- is looked up in two tables on every use. The first call's begin sets
-- them: a library's code cannot reach them while it loads.
local call, max, min, tonum, sunpack, spack, format

-- begin sets the state of a call with keys k and arguments a.
local function begin(k, a)
  if not call then
    call, max, min, tonum = redis.call, math.max, math.min, tonumber
    sunpack, spack, format = struct.unpack, struct.pack, string.format
  end
  KEYS, ARGV = k, a
  W, F, M, P, S = k[1], k[2], k[3], k[4], k[5]
  local offset, w
  offset, w, ttl, span, refresh = sunpack('>ddddd', a[1])
  windowed, proc = w == 1, a[2]
  local clock = call('TIME')
  now = clock[1] * 1000000 + clock[2] + offset
  renewEvery = span
  if renewEvery < 60000000 then renewEvery = 60000000 end
  rank, loaded = -1, false
end

-- num returns the integer n as text, for an argument of a command: Redis
-- would write a number with printf's %.17g, which costs a few thousand
-- instructions for an instant in µs; %d costs a few hundred.
local function num(n) return format('%d', n) end

-- hnum returns the number in M's field, 0 when there is none.
local function hnum(field)
  return tonum(call('HGET', M, field) or '0') or 0
end

-- The hot field. What a window's decision reads and writes every time,
-- besides its entries, is one field of M, 'hot': the ring's description
-- (see the ring below: the place of the oldest send, the count, the
-- places, the latest instant and the limit the size grows to), the latest
-- slot given before jitter (last) and when renew is due next (ren), as
-- seven big-endian doubles: one field, and no number in text, cost a
-- script far less than a field each.

-- ringOf sets the ring, and the state kept with it, from M's hot field as
-- read (v, false or nil: none, for a new budget: renew is then due).
local function ringOf(v)
  if v and #v == 56 then
    ring.h, ring.n, ring.c, ring.l, ring.limit, ring.last, ring.ren = sunpack('>ddddddd', v)
  else
    ring.h, ring.n, ring.c, ring.l, ring.limit, ring.last, ring.ren = 0, 0, 0, 0, 0, 0, 0
  end
  loaded = true
end

-- ringLoad reads the ring from M unless read already.
local function ringLoad()
  if not loaded then ringOf(call('HGET', M, 'hot')) end
  return ring
end

-- ringFields returns M's hot field, to be written. The ring's table is
-- kept from call to call: one not read in this call holds another
-- budget's.
local function ringFields()
  if not loaded then error('the hot field is written without being read') end
  return 'hot', spack('>ddddddd', ring.h, ring.n, ring.c, ring.l, ring.limit, ring.last, ring.ren)
end

-- live returns the processes sharing the budget whose presence has not
-- lapsed. Presences lapse at whole µs: later than now is now + 1 on.
local function live()
  return call('ZRANGEBYSCORE', P, num(now + 1), '+inf')
end

-- countOf returns the number of the live processes ps, and sets rank.
local function countOf(ps)
  rank = 0
  for _, p in ipairs(ps) do
    if p < proc then rank = rank + 1 end
  end
  return #ps
end

-- count returns the number of live processes sharing the budget, and sets
-- rank (see countOf).
local function count() return countOf(live()) end

-- join refreshes this process's presence and reports whether it was live.
-- When it had lapsed (or begins), M's e:<process> records when it began
-- again: a reservation
-- recorded since then has not been freed for a lapse, nor lost with the
-- budget (see confirm.lua). The fields go with the process's presence.
-- ps, when given, are the live processes as just read: this process's own
-- presence is then not read again.
local function join(ps)
  local was = false
  if ps then
    for _, p in ipairs(ps) do
      if p == proc then was = true end
    end
  else
    local s = call('ZSCORE', P, proc)
    was = s ~= false and tonum(s) > now
  end
  if not was then call('HSET', M, 'e:' .. proc, now) end
  call('ZADD', P, num(now + ttl), proc)
  return was
end

-- here refreshes this process's presence when asked to (ahead: this call
-- records a reservation ahead), and returns the number of processes
-- sharing the budget (-1: not counted).
local function here(ahead)
  if refresh == 1 then
    local ps = live()
    if not join(ps) then ps[#ps + 1] = proc end
    return countOf(ps)
  end
  if refresh == 2 and ahead then join() end
  return -1
end

-- renew, at most every renewEvery (when M's ren says, for a window its
-- hot field), and on a budget's first use, drops freed slots already
-- past, abandoned linear reservations (a timespan past their slots) and
-- the presence records of processes no longer present, makes W and F exist (a member at instant 0
-- constrains nothing), records the policy for status, and pushes the
-- expiry of all four keys past every instant
-- they can hold until the next renewal: each instant recorded meanwhile
-- lies at most a timespan after the cooldown's end or the time it was
-- recorded, and must count for a timespan after that.
local function renew(due, cd, limit)
  if due > now then return end
  call('ZREMRANGEBYSCORE', F, '-inf', '(' .. num(now))
  if not windowed then call('ZREMRANGEBYSCORE', W, '-inf', num(now - span)) end
  call('ZADD', W, 0, '!')
  call('ZADD', F, 0, '!')
  join()
  for _, f in ipairs(call('HKEYS', M)) do
    if string.sub(f, 1, 2) == 'b:' and not call('ZSCORE', W, string.sub(f, 3)) then
      call('HDEL', M, f, 'a:' .. call('HGET', M, f))
    end
    if string.sub(f, 1, 2) == 'e:' then
      local s = call('ZSCORE', P, string.sub(f, 3))
      if not s or tonum(s) <= now then call('HDEL', M, f) end
    end
  end
  call('HSET', M, 'nf', call('ZCOUNT', F, '(0', '+inf'), 'ren', now + renewEvery, 'span', span)
  if windowed then
    ringLoad().ren = now + renewEvery
    call('HSET', M, ringFields())
  end
  if limit then
    local strategy = 'linear'
    if windowed then strategy = 'window' end
    call('HSET', M, 'limit', limit, 'strategy', strategy)
  end
  local ms = math.ceil((max(cd, now) - now + 2 * span + renewEvery + ttl) / 1000) + 5000
  for _, k in ipairs({W, F, M, P, S}) do call('PEXPIRE', k, ms) end
end

-- Member names. A reservation is named 'r' .. its place .. ':' .. the
-- process holding it; its place is a sequence number of the process that
-- reserved it, in 13 base-36 digits, and that process's name, so that
-- entries at one instant sort in the order they were reserved. A released
-- slot keeps the place (place .. '~') and a newcomer that claims it takes
-- it over, as the memory store keeps a released entry where it was. A
-- send is '=' .. a name: at one instant, sends sort first. '!' at 0 only
-- makes a key exist. A slot freed for a departed process is '~' .. a
-- number (see compact in prelude.lua): a newcomer claiming it keeps its
-- own name.

-- released reports whether m names a released slot.
local function released(m) return string.find(m, '~', 1, true) ~= nil end

-- owner returns the process holding the reservation m (nil: not a
-- reservation).
local function owner(m)
  return string.match(m, '^[rm]%w+:(%x+)$')
end

-- freedName returns the name of the released slot of reservation m.
local function freedName(m)
  local place = string.match(m, '^([rm]%w+):%x+$')
  if place then return place .. '~' end
  return '~' .. m
end

-- A confirm that moves entries to one instant renames them (see
-- confirm.lua) 'm' .. a place .. ':' .. the holder, and M's a:<name>
-- then gives the current name of the reservation its holder knows as
-- name, b:<current name> that name back.

-- current returns the name under which the reservation its holder knows
-- as m is recorded, and its instant (nil: not recorded).
local function current(m)
  local s = call('ZSCORE', W, m)
  if s then return m, tonum(s) end
  local c = call('HGET', M, 'a:' .. m)
  if c then
    s = call('ZSCORE', W, c)
    if s then return c, tonum(s) end
  end
  return m, nil
end

-- forget drops the aliases of the entry named m, once sent or released.
local function forget(m)
  local o = call('HGET', M, 'b:' .. m)
  if o then call('HDEL', M, 'a:' .. o, 'b:' .. m) end
end

-- free turns a waiting reservation into a freed slot: a window keeps it
-- counted until a newcomer claims it, so later reservations stay valid.
-- M's nf counts the freed slots, so that a reserve looks for one only when
-- there are some.
local function free(m, s)
  local f = freedName(m)
  forget(m)
  call('ZREM', W, m)
  if windowed then call('ZADD', W, num(s), f) end
  call('ZADD', F, num(s), f)
  call('HINCRBY', M, 'nf', 1)
end

-- sendName returns the name member is recorded under with wait: a
-- request admitted at once (wait <= 0) is recorded under the name of a
-- send when sends is true (see reserve_window.lua), which a late waiter's
-- Confirm never moves.
local function sendName(member, wait, sends)
  if sends and wait <= 0 then return '=' .. member end
  return member
end

-- claim gives the earliest freed slot from t0 to slot, if any, to member,
-- which takes over its place, and returns its instant (nil: none) and the
-- name member is recorded under. nf is the count of freed slots; sends,
-- whether one admitted at once is named a send (see sendName).
local function claim(nf, t0, slot, member, maxwait, sends)
  if nf <= 0 then return nil end
  local freed = call('ZRANGEBYSCORE', F, num(t0), num(slot), 'WITHSCORES', 'LIMIT', 0, 1)
  if #freed == 0 then return nil end
  local at = tonum(freed[2])
  if at - now > maxwait then return at end
  call('ZREM', F, freed[1])
  call('HINCRBY', M, 'nf', -1)
  local place = string.match(freed[1], '^([rm]%w+)~$')
  if place then member = place .. ':' .. proc end
  member = sendName(member, at - now, sends)
  if windowed then
    call('ZREM', W, freed[1])
    call('ZADD', W, num(at), member)
  elseif at > now then
    call('ZADD', W, num(at), member)
  end
  return at, member
end

-- answer returns a reserve's reply (see reserveReply in scripts.go): the
-- status, the wait µs, 1 while a cooldown lasts, now µs, base µs (the
-- slot before jitter), mark µs, the processes sharing the budget and this
-- one's rank when this call counted them (else -1, -1), and the name
-- recorded.
local function answer(status, wait, cooling, mark, procs, base, name)
  local r = -1
  if procs >= 0 then r = rank end
  return {status, wait, cooling, now, base, mark, procs, r, name}
end

-- jitter returns the part of j that keeps a wait within maxwait.
local function jitter(wait, j, maxwait)
  if j <= 0 then return 0 end
  local room = maxwait - wait
  if room < j then return max(room, 0) end
  return j
end

-- The ring. A window counts its sends by instant only: the limit-th
-- latest decides where the next request goes. So the sends that no
-- Confirm or Sent still moves are kept in S, a string of 8-byte instants
-- (big-endian doubles of µs), the latest `limit` of them at most, in time
-- order from the oldest's place around a buffer of places, as M's hot
-- field describes it (see ringOf), with the latest instant. A send is
-- added with one SETRANGE, in place, over the oldest when the buffer is
-- full: the buffer grows, doubling up to the limit, only when the sends a
-- timespan past free less than a quarter of it, and only by being written
-- anew (SET, which allocates no more than it holds). A send older than
-- the limit-th latest, or than a timespan, counts for nothing that the
-- window decides.

-- ringRead returns the instants at places i to j - 1 of the ring, counted
-- from its oldest, in order.
local function ringRead(i, j)
  local out = {}
  if j <= i then return out end
  local p = (ring.h + i) % ring.c
  local q = p + j - i
  local bytes
  if q <= ring.c then
    bytes = call('GETRANGE', S, num(p * 8), num(q * 8 - 1))
  else
    bytes = call('GETRANGE', S, p * 8, ring.c * 8 - 1) .. call('GETRANGE', S, 0, (q - ring.c) * 8 - 1)
  end
  for k = 0, j - i - 1 do out[k + 1] = sunpack('>d', bytes, k * 8 + 1) end
  return out
end

-- ringWrite writes instants xs at places i onwards of the ring.
local function ringWrite(i, xs)
  local parts = {}
  for k, x in ipairs(xs) do parts[k] = spack('>d', x) end
  local bytes = table.concat(parts)
  local p = (ring.h + i) % ring.c
  local room = (ring.c - p) * 8
  if #bytes <= room then
    call('SETRANGE', S, p * 8, bytes)
  else
    call('SETRANGE', S, p * 8, string.sub(bytes, 1, room))
    call('SETRANGE', S, 0, string.sub(bytes, room + 1))
  end
end

-- ringRebuild writes the ring anew with xs, in order, in a buffer of c
-- places (the latest c of xs, when there are more), and gives S the
-- expiry of M.
local function ringRebuild(xs, c)
  local from = max(#xs - c, 0)
  local parts = {}
  for k = from + 1, #xs do parts[#parts + 1] = spack('>d', xs[k]) end
  ring.h, ring.n, ring.c = 0, #parts, c
  if #xs > 0 then ring.l = xs[#xs] end
  call('SET', S, table.concat(parts) .. string.rep('\0', (c - #parts) * 8))
  local ms = call('PTTL', M)
  if ms > 0 then call('PEXPIRE', S, ms) end
end

-- ringAfter returns the ring's sends later than instant x, in order,
-- reading it from its latest.
local function ringAfter(x)
  local out, hi = {}, ring.n
  while hi > 0 do
    local lo = max(hi - 32, 0)
    local xs = ringRead(lo, hi)
    local k = #xs
    while k > 0 and xs[k] > x do k = k - 1 end
    for i = #xs, k + 1, -1 do out[#out + 1] = xs[i] end
    if k > 0 then break end
    hi = lo
  end
  local n = #out
  for i = 1, math.floor(n / 2) do out[i], out[n - i + 1] = out[n - i + 1], out[i] end
  return out
end

-- ringMerge adds sends at instants ats, in order, to a ring with room for
-- them all: the ring's sends later than the earliest of them, read from
-- the latest back, are written anew with them, in order. A send comes
-- late when it is recorded after later ones: those of other processes,
-- or of this one's other batches (see sent.lua).
local function ringMerge(ats)
  local later = none
  if ring.n > 0 and ats[1] < ring.l then later = ringAfter(ats[1]) end
  local merged, i, j = {}, 1, 1
  while i <= #ats or j <= #later do
    if j > #later or (i <= #ats and ats[i] <= later[j]) then
      merged[#merged + 1], i = ats[i], i + 1
    else
      merged[#merged + 1], j = later[j], j + 1
    end
  end
  ringWrite(ring.n - #later, merged)
  ring.n = ring.n + #ats
  ring.l = merged[#merged]
end

-- ringAdd adds a send at instant at to a ring of at most limit places.
-- The caller writes ringFields to M.
local function ringAdd(at, limit)
  if limit < 1 then limit = 1 end
  ring.limit = limit
  local full = ring.n == ring.c
  if ring.c > 0 and (not full or ring.c >= limit) then
    if ring.n == 0 or at >= ring.l then
      -- The common case, in order and with room or at the limit: the
      -- send takes the next place, the oldest's when full.
      call('SETRANGE', S, num(((ring.h + ring.n) % ring.c) * 8), spack('>d', at))
      if full then ring.h = (ring.h + 1) % ring.c else ring.n = ring.n + 1 end
      ring.l = at
      return
    end
    -- Late. At the limit the oldest gives way, unless the send is older
    -- still: only the limit latest count.
    if full then
      if ringRead(0, 1)[1] > at then return end
      ring.h, ring.n = (ring.h + 1) % ring.c, ring.n - 1
    end
    ringMerge({at})
    return
  end
  local grow = false
  if full and ring.c > 0 and ring.c < limit then
    -- Full: the sends a timespan past make room, all at once; the buffer
    -- grows when they leave less than a quarter of it, so that a scan
    -- comes no sooner than a quarter of the buffer's sends later.
    local stale, lo = 0, 0
    while lo < ring.n do
      local xs = ringRead(lo, min(lo + 32, ring.n))
      for _, x in ipairs(xs) do
        if x > now - span then break end
        stale = stale + 1
      end
      if stale < lo + #xs then break end
      lo = lo + #xs
    end
    ring.h, ring.n = (ring.h + stale) % ring.c, ring.n - stale
    grow = 4 * stale < ring.c
  end
  if (grow or ring.n == ring.c) and ring.c < limit then
    local xs = ringRead(0, ring.n)
    local k = #xs
    while k > 0 and xs[k] > at do k = k - 1 end
    table.insert(xs, k + 1, at)
    ringRebuild(xs, min(max(16, 2 * ring.c), limit))
    return
  end
  -- Room made by the stale sends, or an empty ring whose last send was
  -- later: the send takes its place. (A full ring took the cases above at
  -- its limit, and was written anew below it.)
  if ring.n > 0 and at < ring.l then
    ringMerge({at})
    return
  end
  ringWrite(ring.n, {at})
  ring.n = ring.n + 1
  ring.l = at
end

-- ringAddMany adds sends at instants ats (in any order; sorted here) to a
-- ring of at most limit places, as ringAdd would one by one. With room for
-- them all, that is one merge (one read of the ring's sends later than the
-- earliest of them and one write): a batch of another process's sends
-- lands among this one's. The caller writes ringFields to M.
local function ringAddMany(ats, limit)
  if #ats == 1 then return ringAdd(ats[1], limit) end
  if ring.c == 0 or ring.n + #ats > ring.c then
    for _, at in ipairs(ats) do ringAdd(at, limit) end
    return
  end
  ring.limit = max(limit, 1)
  table.sort(ats)
  ringMerge(ats)
end

-- lthOf returns the limit-th latest instant of the entries ws (instants,
-- latest first: W's, up to limit of them) and the ring's but its skip
-- latest. With w_j and s_i the j-th and i-th latest of each, it is the
-- latest of min(w_j, s_(limit-j)) over j (w_0 and s_0 being +inf); nil
-- when there are fewer than limit entries. It reads from the ring only the
-- sends that can be that one.
local function lthOf(ws, limit, skip)
  -- (Comparisons rather than math.max and math.min, which cost a C call
  -- each, on every decision.)
  local n, hi = ring.n - skip, #ws
  if n < 0 then n = 0 end
  if hi > limit then hi = limit end
  local lo = limit - n
  if lo > hi then return nil end
  if lo < 0 then lo = 0 end
  -- s_iMax (the earliest needed) to s_iMin, in order.
  local iMin, iMax = max(limit - hi, 1), limit - lo
  local s = ringRead(n - iMax, n - iMin + 1)
  local best
  for j = lo, hi do
    local i, x = limit - j, nil
    if i > 0 then x = s[iMax - i + 1] end
    if j > 0 and (not x or ws[j] < x) then x = ws[j] end
    if x and (not best or x > best) then best = x end
  end
  return best
end

-- unionLatest returns the k latest instants of W's entries w (as
-- ZREVRANGE gives them, with scores, latest first; its k latest at least)
-- and of the ring, latest first.
local function unionLatest(w, k)
  local r, a = {}, 1
  local s = ringRead(max(ring.n - k, 0), ring.n)
  local b = #s
  while #r < k and (2 * a <= #w or b > 0) do
    local x = w[2 * a] and tonum(w[2 * a])
    if x and (b == 0 or x >= s[b]) then
      r[#r + 1], a = x, a + 1
    else
      r[#r + 1], b = s[b], b - 1
    end
  end
  return r
end

-- A late confirm's own (confirm.lua), kept here so that a call makes no
-- closure of them.

-- isSent reports whether W's entry m is a send, or the placeholder.
local function isSent(m)
  local c = string.sub(m, 1, 1)
  return c == '=' or c == '!'
end

-- base36 returns n in width base-36 digits.
local function base36(n, width)
  local out = ''
  for _ = 1, width do
    local d = n % 36
    out = string.sub('0123456789abcdefghijklmnopqrstuvwxyz', d + 1, d + 1) .. out
    n = (n - d) / 36
  end
  return out
end

-- confirmed returns a late confirm's reply for member, which leaves at t
-- (see confirm.lua).
local function confirmed(t, member, limit)
  local left = 0
  if t > now then left = tonum(call('ZSCORE', W, member)) - now end
  if ARGV[5] ~= '1' then return left end
  local out = {left}
  local xs = unionLatest(call('ZREVRANGE', W, 0, limit - 1, 'WITHSCORES'), limit)
  for i = #xs, 1, -1 do out[#out + 1] = xs[i] end
  return out
end

