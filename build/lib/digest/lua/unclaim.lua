-- Give a claimed fold back to pending (its queue was full): merge it into any fold that arrived since.
-- KEYS[1]  the claimed fold hash
-- KEYS[2]  the live fold hash of the same user|kind|entity
-- KEYS[3]  pending zset
-- KEYS[4]  the flush's claim set
-- ARGV[1]  the member
-- Returns  1 merged back; 0 nothing was claimed under that name
local claimed = redis.call('HMGET', KEYS[1], 'n', 'p', 'f', 'l')
if not claimed[1] then
  redis.call('SREM', KEYS[4], ARGV[1])
  return 0
end
local live = redis.call('HMGET', KEYS[2], 'n', 'p', 'f', 'l')
if live[1] then
  -- The live fold is newer: it keeps its payload and last-seen time, and gains the count.
  redis.call('HINCRBY', KEYS[2], 'n', tonumber(claimed[1]))
  redis.call('HSET', KEYS[2], 'f', claimed[3])
else
  redis.call('HSET', KEYS[2], 'n', claimed[1], 'p', claimed[2], 'f', claimed[3], 'l', claimed[4])
end
redis.call('ZADD', KEYS[3], claimed[3], ARGV[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[4], ARGV[1])
return 1
