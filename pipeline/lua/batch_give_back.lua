-- Give messages a batch did not start back to their queue, at the end workers take from next, in their order.
-- A message a reaper already put back (its consumer was taken for dead) is not pushed twice.
-- KEYS[1]  the batch consumer's processing list of this source
-- KEYS[2]  the source list (the queue)
-- ARGV     the messages, oldest first
-- Returns  how many went back
local back = 0
for i = #ARGV, 1, -1 do
  if redis.call('LREM', KEYS[1], -1, ARGV[i]) > 0 then
    redis.call('RPUSH', KEYS[2], ARGV[i])
    back = back + 1
  end
end
return back
