-- Drop a claimed fold whose digest went out on another Redis (push_handover.lua): it leaves the store.
-- KEYS[1]   the claimed fold hash
-- KEYS[2]   the flush's claim set
-- KEYS[3]   the fold store's size: k (keys), b (payload bytes)
-- ARGV[1]   the claim-set member
-- Returns   1 dropped; 0 it was gone already
--! include claimed
local dropped = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  forget_fold(KEYS[1], KEYS[3])
  dropped = 1
end
redis.call('SREM', KEYS[2], ARGV[1])
return dropped
