-- Reliable fetch across several lists (a queue's priority sub-lists, or several queues): move the first
-- message found into this consumer's processing list, in one step, so it is never only in flight.
-- KEYS[1..n]     the source lists, in the order they are served
-- KEYS[n+1..2n]  this consumer's processing list for each source, in the same order
-- Returns        {source, message}, or nil when every list is empty
local n = #KEYS / 2
for i = 1, n do
  local message = redis.call('RPOP', KEYS[i])
  if message then
    redis.call('LPUSH', KEYS[n + i], message)
    return {KEYS[i], message}
  end
end
return nil
