-- Shared by every script. KEYS: the budget's entries (W: every send of a
-- window; the waiting reservations of a linear budget), its freed slots
-- (F), its state (M) and the presence of the processes sharing it (P). All
-- four carry the budget key in a hash tag: one Cluster slot.
-- ARGV[1] time offset (µs, 0 outside tests), [2] 1 for a window budget,
-- [3] this process's name, [4] how long its presence lasts (µs), [5] the
-- timespan (µs), [6] whether to refresh this process's presence: 1 yes,
-- and count the processes (every few seconds per budget); 2 only if this
-- call records a reservation ahead (when the presence may be lapsing);
-- 0 no. Then each script's own.
-- Times are µs of the Redis server's clock, never a client's.
--
-- The scripts a request runs (reserve, confirm, release) are kept to a few
-- commands; what keeps the budget tidy runs rarely: renew, at most every
-- renewEvery, and the upkeep of upkeep.lua while this process has
-- requests waiting.
local W, F, M, P = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local windowed = ARGV[2] == '1'
local proc, ttl, span = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2]) + tonumber(ARGV[1])
local renewEvery = math.max(span, 60000000)

local function num(n) return string.format('%.0f', n) end

-- hnum returns the number in M's field, 0 when there is none.
local function hnum(field)
  return tonumber(redis.call('HGET', M, field) or '0') or 0
end

-- rank is this process's place among the live processes sharing the
-- budget, in the order of their names, when counted (-1: not counted): it
-- decides which of them take the seats of a concurrency limit that does
-- not divide evenly.
local rank = -1

-- count returns the number of live processes sharing the budget, and sets
-- rank.
local function count()
  local live = redis.call('ZRANGEBYSCORE', P, '(' .. num(now), '+inf')
  rank = 0
  for _, p in ipairs(live) do
    if p < proc then rank = rank + 1 end
  end
  return #live
end

-- join refreshes this process's presence. When it had lapsed (or begins),
-- M's e:<process> records when it began again: a reservation recorded
-- since then has not been freed for a lapse, nor lost with the budget
-- (see confirm.lua). The field goes with the process's presence.
local function join()
  local s = redis.call('ZSCORE', P, proc)
  if not s or tonumber(s) <= now then redis.call('HSET', M, 'e:' .. proc, now) end
  redis.call('ZADD', P, now + ttl, proc)
end

-- here refreshes this process's presence when asked to (ahead: this call
-- records a reservation ahead), and returns the number of processes
-- sharing the budget (-1: not counted).
local function here(ahead)
  if ARGV[6] == '1' then
    join()
    return count()
  end
  if ARGV[6] == '2' and ahead then join() end
  return -1
end

-- renew, at most every renewEvery (and on a budget's first use), drops
-- freed slots already past, abandoned linear reservations (a timespan
-- past their slots) and the presence records of processes no longer
-- present (those a previous version's upkeep removed), makes W and
-- F exist (a member at instant 0 constrains nothing), records the policy
-- for status, and pushes the expiry of all four keys past every instant
-- they can hold until the next renewal: each instant recorded meanwhile
-- lies at most a timespan after the cooldown's end or the time it was
-- recorded, and must count for a timespan after that.
local function renew(due, cd, limit)
  if due > now then return end
  redis.call('ZREMRANGEBYSCORE', F, '-inf', '(' .. num(now))
  if not windowed then redis.call('ZREMRANGEBYSCORE', W, '-inf', num(now - span)) end
  redis.call('ZADD', W, 0, '!')
  redis.call('ZADD', F, 0, '!')
  join()
  for _, f in ipairs(redis.call('HKEYS', M)) do
    if string.sub(f, 1, 2) == 'b:' and not redis.call('ZSCORE', W, string.sub(f, 3)) then
      redis.call('HDEL', M, f, 'a:' .. redis.call('HGET', M, f))
    end
    if string.sub(f, 1, 2) == 'e:' then
      local s = redis.call('ZSCORE', P, string.sub(f, 3))
      if not s or tonumber(s) <= now then redis.call('HDEL', M, f) end
    end
  end
  redis.call('HSET', M, 'nf', redis.call('ZCOUNT', F, '(0', '+inf'), 'ren', now + renewEvery, 'span', span)
  if limit then
    local strategy = 'linear'
    if windowed then strategy = 'window' end
    redis.call('HSET', M, 'limit', limit, 'strategy', strategy)
  end
  local ms = math.ceil((math.max(cd, now) - now + 2 * span + renewEvery + ttl) / 1000) + 5000
  for _, k in ipairs({W, F, M, P}) do redis.call('PEXPIRE', k, ms) end
end

-- Member names. A reservation is named 'r' .. its place .. ':' .. the
-- process holding it; its place is a sequence number of the process that
-- reserved it, in 13 base-36 digits, and that process's name, so that
-- entries at one instant sort in the order they were reserved. A released
-- slot keeps the place (place .. '~') and a newcomer that claims it takes
-- it over, as the memory store keeps a released entry where it was. A
-- send is '=' .. a name: at one instant, sends sort first. '!' at 0 only
-- makes a key exist. Names of earlier versions are still read: a
-- reservation 'process:id', a released slot '~' .. anything, a send
-- '=' .. anything; they sort at one instant by name, and a newcomer
-- claiming such a released slot keeps its own name.

-- released reports whether m names a released slot.
local function released(m) return string.find(m, '~', 1, true) ~= nil end

-- owner returns the process holding the reservation m (nil: not a
-- reservation).
local function owner(m)
  local o = string.match(m, '^[rm]%w+:(%x+)$')
  if o then return o end
  return string.match(m, '^([^:~=]+):')
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
  local s = redis.call('ZSCORE', W, m)
  if s then return m, tonumber(s) end
  local c = redis.call('HGET', M, 'a:' .. m)
  if c then
    s = redis.call('ZSCORE', W, c)
    if s then return c, tonumber(s) end
  end
  return m, nil
end

-- forget drops the aliases of the entry named m, once sent or released.
local function forget(m)
  local o = redis.call('HGET', M, 'b:' .. m)
  if o then redis.call('HDEL', M, 'a:' .. o, 'b:' .. m) end
end

-- free turns a waiting reservation into a freed slot: a window keeps it
-- counted until a newcomer claims it, so later reservations stay valid.
-- M's nf counts the freed slots, so that a reserve looks for one only when
-- there are some.
local function free(m, s)
  local f = freedName(m)
  forget(m)
  redis.call('ZREM', W, m)
  if windowed then redis.call('ZADD', W, s, f) end
  redis.call('ZADD', F, s, f)
  redis.call('HINCRBY', M, 'nf', 1)
end

-- claim gives the earliest freed slot from t0 to slot, if any, to member,
-- which takes over its place, and returns its instant (nil: none) and the
-- name member is recorded under. nf is the count of freed slots; named,
-- when given, names the member by its wait.
local function claim(nf, t0, slot, member, maxwait, named)
  if nf <= 0 then return nil end
  local freed = redis.call('ZRANGEBYSCORE', F, num(t0), num(slot), 'WITHSCORES', 'LIMIT', 0, 1)
  if #freed == 0 then return nil end
  local at = tonumber(freed[2])
  if at - now > maxwait then return at end
  redis.call('ZREM', F, freed[1])
  redis.call('HINCRBY', M, 'nf', -1)
  local place = string.match(freed[1], '^([rm]%w+)~$')
  if place then member = place .. ':' .. proc end
  if named then member = named(member, at - now) end
  if windowed then
    redis.call('ZREM', W, freed[1])
    redis.call('ZADD', W, at, member)
  elseif at > now then
    redis.call('ZADD', W, at, member)
  end
  return at, member
end

-- jitter returns the part of j that keeps a wait within maxwait.
local function jitter(wait, j, maxwait)
  if j <= 0 then return 0 end
  local room = maxwait - wait
  if room < j then return math.max(room, 0) end
  return j
end
