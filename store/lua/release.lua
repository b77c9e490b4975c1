-- Release a waiting reservation that will not be used. ARGV[5] member.
-- Its slot, if still ahead, goes to a later newcomer.
presence()
local s = redis.call('ZSCORE', W, ARGV[5])
if s and tonumber(s) > now then free(ARGV[5], tonumber(s)) end
return 0
