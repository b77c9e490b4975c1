-- The last cut shared on the budget (see share_cut.lua): {its message, µs
-- since it was made}, or {} when there is none. KEYS as in hot.lua.
local c = redis.call('HGET', KEYS[3], 'cut')
if not c then return {} end
local msg, at = string.match(c, '^(.*) (%d+)$')
if not msg then return {} end
local t = redis.call('TIME')
return {msg, tonumber(t[1]) * 1000000 + tonumber(t[2]) - tonumber(at)}
