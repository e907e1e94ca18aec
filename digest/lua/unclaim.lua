-- Give a claimed fold back to pending (its queue was full): merge it into any fold that arrived since.
-- KEYS[1]  the claimed fold hash
-- KEYS[2]  the live fold hash of the same member
-- KEYS[3]  pending zset
-- KEYS[4]  the flush's claim set
-- KEYS[5]  the fold store's size: merged into a live fold, the claimed one leaves it (its payload with it)
-- ARGV[1]  the member
-- ARGV[2]  now: it was due, and is due again at once
-- Returns  1 given back; 0 nothing was claimed under that name
--! include fold_fields
--! include claimed
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[4], ARGV[1])
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  -- The live fold is newer: it keeps its payload and last-seen time, and gains the count, the first-seen
  -- time and the channels of the claimed one.
  local claimed = redis.call('HGETALL', KEYS[1])
  for i = 1, #claimed, 2 do
    local field, value = claimed[i], claimed[i + 1]
    if field == FOLD.count or field == FOLD.entities or field == FOLD.kinds then
      redis.call('HINCRBY', KEYS[2], field, tonumber(value))
    elseif field == FOLD.first_seen or string.sub(field, 1, #FOLD.channel) == FOLD.channel then
      redis.call('HSET', KEYS[2], field, value)
    end
  end
  forget_fold(KEYS[1], KEYS[5])
  -- A live fold held for later (quiet hours, a cadence) keeps its time; the merged events wait with it.
  redis.call('ZADD', KEYS[3], 'GT', ARGV[2], ARGV[1])
else
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
end
redis.call('SREM', KEYS[4], ARGV[1])
return 1
