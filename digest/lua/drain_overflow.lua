-- Move opted-out users' messages from the overflow into their queue while it has room, oldest first.
-- KEYS[1]   the overflow list
-- KEYS[2]   the queue's list
-- KEYS[3..] the queue's priority sub-lists, counted in the depth
-- ARGV[1]   capacity of the queue
-- ARGV[2]   the most messages to move in one call
-- Returns   how many moved
--! include depth
local d = depth(KEYS, 2)
local moved = 0
while d < tonumber(ARGV[1]) and moved < tonumber(ARGV[2]) do
  local message = redis.call('LPOP', KEYS[1])
  if not message then
    break
  end
  redis.call('LPUSH', KEYS[2], message)
  d = d + 1
  moved = moved + 1
end
return moved
