-- Release a waiting reservation that will not be used. ARGV[3] member.
-- Its slot, if still ahead, goes to a later newcomer.
local m, s = current(ARGV[3])
if s and s > now then free(m, s) end
return 0
