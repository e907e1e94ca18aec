-- The bounded push (pipeline/bounded_push.py): count the queue's depth and push, in one atomic step.
-- KEYS[1]   the counters hash
-- KEYS[2]   the caller's idempotency key (a placeholder, never touched, when ARGV[5] is 0)
-- KEYS[3]   the queue's list (pushed to)
-- KEYS[4..] its priority sub-lists (counted in the depth)
-- ARGV[1]   capacity
-- ARGV[2]   hard ceiling
-- ARGV[3]   the message: a standard Celery protocol-2 message as kombu stores it
-- ARGV[4]   the counter field to increment when the message is admitted
-- ARGV[5]   seconds the idempotency key keeps "accepted" once pushed; 0: the call has no key
-- ARGV[6]   the counter field to increment when the key was recorded already (a replay)
-- Returns   1 pushed; 0 full; -1 at the ceiling (one integer: the hot path parses the least it can); or, when the
--           idempotency key was recorded already (by a concurrent call with the same key), its value: nothing pushed
--! include depth
-- depth(lists, first): the summed lengths of lists[first..#lists] (include/depth.lua)
--! include replayed
-- replayed(key, counters, replay_field): the recorded outcome, the replay counted; or nil (include/replayed.lua)
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  local recorded = replayed(KEYS[2], KEYS[1], ARGV[6])
  if recorded then
    return recorded
  end
end
local d = depth(KEYS, 3)
if d >= tonumber(ARGV[2]) then
  return -1
end
if d >= tonumber(ARGV[1]) then
  return 0
end
redis.call('LPUSH', KEYS[3], ARGV[3])
redis.call('HINCRBY', KEYS[1], ARGV[4], 1)
if ttl > 0 then
  redis.call('SET', KEYS[2], 'accepted', 'EX', ttl)
end
return 1
