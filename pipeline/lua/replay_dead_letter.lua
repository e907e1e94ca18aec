-- Put one dead letter back on its queue, if the queue has room, and forget it: together or not at all.
-- KEYS[1]   the dead letters' index zset
-- KEYS[2]   the entries hash
-- KEYS[3]   the counters hash
-- KEYS[4]   the queue's list
-- KEYS[5..4+ARGV[5]]  the queue's priority sub-lists, counted in the depth
-- KEYS[5+ARGV[5]..]   send-state keys of the channels to send again (pipeline.keys.sent), deleted
-- ARGV[1]  entry id
-- ARGV[2]  capacity of the queue
-- ARGV[3]  the message
-- ARGV[4]  counter field of replayed dead letters
-- ARGV[5]  how many priority sub-lists follow the queue in KEYS
-- Returns  1 replayed; 0 the queue is full (the entry stays); -1 no such entry (replayed or dropped already)
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return -1
end
local lists = 4 + tonumber(ARGV[5])
local depth = 0
for i = 4, lists do
  depth = depth + redis.call('LLEN', KEYS[i])
end
if depth >= tonumber(ARGV[2]) then
  return 0
end
redis.call('LPUSH', KEYS[4], ARGV[3])
for i = lists + 1, #KEYS do
  redis.call('DEL', KEYS[i])
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
return 1
