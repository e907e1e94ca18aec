-- The bounded push (pipeline/bounded_push.py): count the queue's depth and push, in one atomic step.
-- KEYS[1]   the counters hash
-- KEYS[2]   the queue's list (pushed to)
-- KEYS[3..] its priority sub-lists (counted in the depth)
-- ARGV[1]   capacity
-- ARGV[2]   hard ceiling
-- ARGV[3]   the message: a standard Celery protocol-2 message as kombu stores it
-- ARGV[4]   the counter field to increment when the message is admitted
-- Returns   1 pushed; 0 full; -1 at the ceiling (one integer: the hot path parses the least it can)
--! include depth
-- depth(lists, first): the summed lengths of lists[first..#lists] (include/depth.lua)
local d = depth(KEYS, 2)
if d >= tonumber(ARGV[2]) then
  return -1
end
if d >= tonumber(ARGV[1]) then
  return 0
end
redis.call('LPUSH', KEYS[2], ARGV[3])
redis.call('HINCRBY', KEYS[1], ARGV[4], 1)
return 1
