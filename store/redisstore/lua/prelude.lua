-- Shared by the scripts that are not on a request's path, after hot.lua.

-- compact gives the slots ahead that were freed to the waiting
-- reservations after them, in order: each waiter moves to the earliest
-- slot not taken by one before it, and the freed slots end up last. The
-- instants ahead stay the same, only who holds them changes, so every
-- window holds what it held. It returns whether anything moved.
local function compact()
  local e = call('ZRANGEBYSCORE', W, '(' .. num(now), '+inf', 'WITHSCORES')
  local slots = {}
  for i = 1, #e, 2 do slots[#slots + 1] = {e[i], tonum(e[i + 1])} end
  if not windowed then
    local f = call('ZRANGEBYSCORE', F, '(' .. num(now), '+inf', 'WITHSCORES')
    for i = 1, #f, 2 do slots[#slots + 1] = {f[i], tonum(f[i + 1])} end
    table.sort(slots, function(x, y) return x[2] < y[2] end)
  end
  local live, moved = {}, false
  for i, x in ipairs(slots) do
    if released(x[1]) then
      call('ZREM', F, x[1])
      if windowed then call('ZREM', W, x[1]) end
    else
      live[#live + 1] = x[1]
      if slots[#live][1] ~= x[1] then moved = true end
    end
  end
  for i, x in ipairs(slots) do
    if i <= #live then
      call('ZADD', W, num(x[2]), live[i])
    else
      local m = '~' .. call('HINCRBY', M, 'freed', 1)
      if windowed then call('ZADD', W, num(x[2]), m) end
      call('ZADD', F, num(x[2]), m)
    end
  end
  return moved
end

-- presence refreshes this process's presence and frees the future
-- reservations of every process whose presence has expired, giving their
-- slots to the reservations after them. It returns the number of
-- processes sharing the budget, and sets rank.
local function presence()
  join()
  local dead = call('ZRANGEBYSCORE', P, '-inf', num(now))
  if #dead > 0 then
    call('ZREMRANGEBYSCORE', P, '-inf', num(now))
    local gone = {}
    for _, d in ipairs(dead) do
      gone[d] = true
      call('HDEL', M, 's:' .. d, 'e:' .. d) -- its seats report, its presence records
    end
    local ahead = call('ZRANGEBYSCORE', W, '(' .. num(now), '+inf', 'WITHSCORES')
    local freed = false
    for i = 1, #ahead, 2 do
      local o = owner(ahead[i])
      if o and gone[o] then
        free(ahead[i], tonum(ahead[i + 1]))
        freed = true
      end
    end
    if freed and compact() then call('PUBLISH', W, 'moved') end
  end
  return count()
end
