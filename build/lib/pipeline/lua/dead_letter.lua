-- Keep one message that cannot be sent, bounded: the oldest entries go first when it is full, and are counted.
-- KEYS[1]  the dead letters' index: zset of entry id -> when it was dead-lettered
-- KEYS[2]  the entries: hash of entry id -> JSON
-- KEYS[3]  the counters hash
-- ARGV[1]  entry id (the same message dead-lettered again, after a redelivery, keeps one entry)
-- ARGV[2]  the entry, JSON
-- ARGV[3]  now, seconds
-- ARGV[4]  the most entries to keep
-- ARGV[5]  counter field of sluice_dead_letters_total{class,reason}
-- ARGV[6]  counter field of the entries dropped because the list was full
-- Returns  {1 when the entry is new (0 when it replaced itself), entries dropped}
local new = 1
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  new = 0
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('HINCRBY', KEYS[3], ARGV[5], 1)
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local dropped = 0
while redis.call('ZCARD', KEYS[1]) > tonumber(ARGV[4]) do
  local oldest = redis.call('ZPOPMIN', KEYS[1])
  redis.call('HDEL', KEYS[2], oldest[1])
  dropped = dropped + 1
end
if dropped > 0 then
  redis.call('HINCRBY', KEYS[3], ARGV[6], dropped)
end
return {new, dropped}
