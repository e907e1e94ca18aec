-- The depth of a queue: the lengths of its lists (the queue and its priority sub-lists) summed, for the
-- lists at KEYS[first..#KEYS]. Every script that checks a bound counts the same way (one definition).
local function depth(first)
  local n = 0
  for i = first, #KEYS do
    n = n + redis.call('LLEN', KEYS[i])
  end
  return n
end
