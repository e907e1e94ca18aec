-- Put one dead letter back on its queue, if the queue has room, and forget it: together or not at all.
-- KEYS[1]   the dead letters' index zset
-- KEYS[2]   the entries hash
-- KEYS[3]   the counters hash
-- KEYS[4..3+ARGV[5]]  send state of the channels to send again: their claims (pipeline.redis.keys.sent), deleted, and
--                      the mark hashes that may hold their "sent" marks (pipeline.broker.marks), their fields deleted
-- then      the queue's list, and its priority sub-lists, counted in the depth
-- ARGV[1]  entry id
-- ARGV[2]  capacity of the queue
-- ARGV[3]  the message
-- ARGV[4]  counter field of replayed dead letters
-- ARGV[5]  how many send-state keys follow the counters hash in KEYS
-- ARGV[6..5+ARGV[5]]  for each of those keys in order: "" to delete the key, else the field to delete from it
-- Returns  1 replayed; 0 the queue is full (the entry stays); -1 no such entry (replayed or dropped already)
--! include depth
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return -1
end
local queue = 4 + tonumber(ARGV[5])
if depth(KEYS, queue) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('LPUSH', KEYS[queue], ARGV[3])
for i = 4, queue - 1 do
  local field = ARGV[i + 2]
  if field == '' then
    redis.call('DEL', KEYS[i])
  else
    redis.call('HDEL', KEYS[i], field)
  end
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
return 1
