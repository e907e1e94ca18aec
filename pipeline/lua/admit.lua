-- Admit one message into a bounded queue: count the queue's depth and push, in one atomic step.
-- KEYS[1]   the queue's list (kombu's Redis transport: producers LPUSH, workers BRPOP the tail)
-- KEYS[2]   the counters hash
-- KEYS[3..] the queue's priority sub-lists, which count in the depth too
-- ARGV[1]   capacity: push only while depth < capacity
-- ARGV[2]   ceiling: the hard limit; depth >= ceiling is an error, never a silent trim
-- ARGV[3]   the message, a Celery protocol-2 message as kombu stores it
-- ARGV[4]   the counter field to increment when the message is admitted
-- Returns   1 pushed; 0 full; -1 at the ceiling (one integer: the hot path parses the least it can)
local depth = redis.call('LLEN', KEYS[1])
for i = 3, #KEYS do
  depth = depth + redis.call('LLEN', KEYS[i])
end
if depth >= tonumber(ARGV[2]) then
  return -1
end
if depth >= tonumber(ARGV[1]) then
  return 0
end
redis.call('LPUSH', KEYS[1], ARGV[3])
redis.call('HINCRBY', KEYS[2], ARGV[4], 1)
return 1
