-- Take back what dead consumers held: each processing list goes back to its source list, at the end
-- workers take from, oldest first; the consumer's delivery tags are returned so the caller restores those
-- messages from kombu's unacked hash (kombu's own restore); then the consumer is forgotten.
-- Key names below the prefix are derived here, because the dead consumers are only known inside the
-- script; Sluice runs each broker on a single Redis (kombu needs one anyway), never on Redis Cluster.
-- KEYS[1]  the consumers zset
-- ARGV[1]  fetch key prefix, "sluice:fetch:"
-- ARGV[2]  the most consumers to reap in one call
-- ARGV[3]  one consumer id to release now, whatever its time (a clean close); "" to reap the dead
-- Returns  {{consumer, messages moved back, {tags}}, ...}
local consumers
if ARGV[3] ~= '' then
  consumers = {ARGV[3]}
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  consumers = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
end
local reaped = {}
for _, consumer in ipairs(consumers) do
  local base = ARGV[1] .. consumer
  local moved = 0
  for _, source in ipairs(redis.call('SMEMBERS', base .. ':sources')) do
    local processing = base .. ':processing:' .. source
    while redis.call('LMOVE', processing, source, 'LEFT', 'RIGHT') do
      moved = moved + 1
    end
  end
  local tags = redis.call('SMEMBERS', base .. ':tags')
  redis.call('DEL', base .. ':sources', base .. ':tags')
  redis.call('ZREM', KEYS[1], consumer)
  table.insert(reaped, {consumer, moved, tags})
end
return reaped
