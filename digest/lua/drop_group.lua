-- Drop a user group's claimed folds whose digest went out on another Redis (push_group_handover.lua): they leave
-- the store together.
-- KEYS[1]   the flush's claim set
-- KEYS[2]   the fold store's size: k (keys), b (payload bytes)
-- ARGV[1]   the name prefix of this flush's claimed fold hashes (the member follows it)
-- ARGV[2..] the members
-- Returns   how many were dropped (the others were gone already)
--! include fold_fields
--! include claimed
local dropped = 0
for i = 2, #ARGV do
  local fold = ARGV[1] .. ARGV[i]
  if redis.call('EXISTS', fold) == 1 then
    forget_fold(fold, KEYS[2])
    dropped = dropped + 1
  end
  redis.call('SREM', KEYS[1], ARGV[i])
end
return dropped
