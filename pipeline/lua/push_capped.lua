-- Push a message that skipped admission (a retry, a beat task) unless its queue is at the ceiling.
-- KEYS[1]   the list to push to (the queue, or one of its priority sub-lists)
-- KEYS[2..] every list of the queue, counted in the depth
-- ARGV[1]   ceiling
-- ARGV[2]   the message
-- Returns   the depth after the push, or -1 when the queue is at its ceiling and nothing was pushed
local depth = 0
for i = 2, #KEYS do
  depth = depth + redis.call('LLEN', KEYS[i])
end
if depth >= tonumber(ARGV[1]) then
  return -1
end
redis.call('LPUSH', KEYS[1], ARGV[2])
return depth + 1
