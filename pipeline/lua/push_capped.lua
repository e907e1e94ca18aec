-- Push a message that skipped admission (a retry, a beat task) unless its queue is at the ceiling.
-- KEYS[1]   the list to push to (the queue, or one of its priority sub-lists)
-- KEYS[2..] every list of the queue, counted in the depth
-- ARGV[1]   ceiling
-- ARGV[2]   the message
-- Returns   the depth after the push, or -1 when the queue is at its ceiling and nothing was pushed
--! include depth
local d = depth(KEYS, 2)
if d >= tonumber(ARGV[1]) then
  return -1
end
redis.call('LPUSH', KEYS[1], ARGV[2])
return d + 1
