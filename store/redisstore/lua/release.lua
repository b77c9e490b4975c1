-- Release a waiting reservation that will not be used. ARGV[7] member.
-- Its slot, if still ahead, goes to a later newcomer.
local s = redis.call('ZSCORE', W, ARGV[7])
if s and tonumber(s) > now then free(ARGV[7], tonumber(s)) end
return 0
