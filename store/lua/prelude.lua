-- Shared by every script. KEYS: the budget's entries (W: every send of a
-- window; the waiting reservations of a linear budget), its freed slots
-- (F), its state (M) and the presence of the processes sharing it (P). All
-- four carry the budget key in a hash tag: one Cluster slot.
-- ARGV[1] time offset (µs, 0 outside tests), ARGV[2] this process's name,
-- ARGV[3] how long its presence lasts (µs), ARGV[4] 1 for a window budget.
-- Times are µs of the Redis server's clock, never a client's.
local W, F, M, P = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local proc = ARGV[2]
local ttl = tonumber(ARGV[3])
local windowed = ARGV[4] == '1'
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2]) + tonumber(ARGV[1])

local function num(n) return string.format('%.0f', n) end

-- free turns a waiting reservation into a freed slot: a window keeps it
-- counted until a newcomer claims it, so later reservations stay valid.
local function free(m, s)
  redis.call('ZREM', W, m)
  if windowed then redis.call('ZADD', W, s, '~' .. m) end
  redis.call('ZADD', F, s, '~' .. m)
end

-- compact gives the slots ahead that were freed to the waiting
-- reservations after them, in order: each waiter moves to the earliest
-- slot not taken by one before it, and the freed slots end up last. The
-- instants ahead stay the same, only who holds them changes, so every
-- window holds what it held. It returns whether anything moved.
local function compact()
  local e = redis.call('ZRANGEBYSCORE', W, '(' .. num(now), '+inf', 'WITHSCORES')
  local slots = {}
  for i = 1, #e, 2 do slots[#slots + 1] = {e[i], tonumber(e[i + 1])} end
  if not windowed then
    local f = redis.call('ZRANGEBYSCORE', F, '(' .. num(now), '+inf', 'WITHSCORES')
    for i = 1, #f, 2 do slots[#slots + 1] = {f[i], tonumber(f[i + 1])} end
    table.sort(slots, function(x, y) return x[2] < y[2] end)
  end
  local live, moved = {}, false
  for i, x in ipairs(slots) do
    if string.sub(x[1], 1, 1) == '~' then
      redis.call('ZREM', F, x[1])
      if windowed then redis.call('ZREM', W, x[1]) end
    else
      live[#live + 1] = x[1]
      if slots[#live][1] ~= x[1] then moved = true end
    end
  end
  for i, x in ipairs(slots) do
    if i <= #live then
      redis.call('ZADD', W, x[2], live[i])
    else
      local m = '~' .. redis.call('HINCRBY', M, 'freed', 1)
      if windowed then redis.call('ZADD', W, x[2], m) end
      redis.call('ZADD', F, x[2], m)
    end
  end
  return moved
end

-- presence refreshes this process's presence and frees the future
-- reservations of every process whose presence has expired, giving their
-- slots to the reservations after them. It returns the number of
-- processes sharing the budget.
local function presence()
  redis.call('ZADD', P, now + ttl, proc)
  local dead = redis.call('ZRANGEBYSCORE', P, '-inf', num(now))
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', P, '-inf', num(now))
    local gone = {}
    for _, d in ipairs(dead) do gone[d] = true end
    local ahead = redis.call('ZRANGEBYSCORE', W, '(' .. num(now), '+inf', 'WITHSCORES')
    local freed = false
    for i = 1, #ahead, 2 do
      local owner = string.match(ahead[i], '^([^:~=]+):')
      if owner and gone[owner] then
        free(ahead[i], tonumber(ahead[i + 1]))
        freed = true
      end
    end
    if freed and compact() then redis.call('PUBLISH', W, 'moved') end
  end
  return redis.call('ZCARD', P)
end

local function hnum(field)
  return tonumber(redis.call('HGET', M, field) or '0') or 0
end

local function latest(key)
  local e = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #e == 0 then return 0 end
  return tonumber(e[2])
end

-- expire makes every key of the budget vanish by itself once nothing in it
-- can matter: span after the latest instant it holds.
local function expire(span)
  local until_ = math.max(latest(W), latest(F), hnum('cd'), hnum('last'), hnum('tat'), now)
  local ms = math.ceil((until_ - now + span + ttl) / 1000) + 1000
  for _, k in ipairs({W, F, M, P}) do redis.call('PEXPIRE', k, ms) end
end

-- jitter returns the part of j that keeps a wait within maxwait.
local function jitter(wait, j, maxwait)
  if j <= 0 then return 0 end
  local room = maxwait - wait
  if room < j then return math.max(room, 0) end
  return j
end
