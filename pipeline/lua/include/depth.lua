-- The depth of a queue: the lengths of its lists (the queue and its priority sub-lists) summed, for the
-- names at lists[first..#lists] (a script passes its KEYS, where the queue's lists come last). Every script
-- that checks a bound counts the same way (one definition).
local function depth(lists, first)
  local n = 0
  for i = first, #lists do
    n = n + redis.call('LLEN', lists[i])
  end
  return n
end
