-- Take up to N messages of a queue into a batch consumer's processing lists, and register the consumer with the
-- reliable fetch's reaper (pipeline.broker.reaper) in the same step when it took any: a message is always in its queue or
-- in a processing list that a reaper finds once the consumer's heartbeat is gone, never only in a worker's memory,
-- and a consumer that took nothing is not registered (an idle one costs the reaper nothing).
-- KEYS[1]        the consumers set (the reaper's registry)
-- KEYS[2]        this consumer's heartbeat key
-- KEYS[3]        this consumer's sources set
-- KEYS[4..n+3]   the source lists, in the order they are served (a queue and its priority sub-lists)
-- KEYS[n+4..2n+3] this consumer's processing list for each source, in the same order
-- ARGV[1]        the most messages to take
-- ARGV[2]        heartbeat TTL, ms (the transport's fetch_dead_after_s)
-- ARGV[3]        this consumer's id
-- Returns        {source, message, source, message, ...}, oldest first
local n = (#KEYS - 3) / 2
local wanted = tonumber(ARGV[1])
local taken, count = {}, 0
for i = 1, n do
  while count < wanted do
    local message = redis.call('LMOVE', KEYS[3 + i], KEYS[3 + n + i], 'RIGHT', 'LEFT')
    if not message then
      break
    end
    count = count + 1
    taken[#taken + 1] = KEYS[3 + i]
    taken[#taken + 1] = message
  end
end
if count > 0 then
  -- One script: no reaper can see the messages moved before the consumer is registered.
  redis.call('SET', KEYS[2], '1', 'PX', tonumber(ARGV[2]))
  redis.call('SADD', KEYS[1], ARGV[3])
  for i = 1, n do
    redis.call('SADD', KEYS[3], KEYS[3 + i])
  end
end
return taken
