-- Share a cut of the budget's concurrency limit (see seats.go): publish
-- ARGV[1], its message, on the budget's channel, and keep it in the
-- budget's state (M's cut) with the instant it was made, for the
-- processes that start sharing the budget later. KEYS as in hot.lua.
local W, M = KEYS[1], KEYS[3]
if redis.call('EXISTS', M) == 1 then
  local t = redis.call('TIME')
  redis.call('HSET', M, 'cut', ARGV[1] .. ' ' .. t[1] .. string.format('%06d', tonumber(t[2])))
end
redis.call('PUBLISH', W, ARGV[1])
return 0
