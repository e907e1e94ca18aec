-- Take back what dead consumers held: each processing list goes back to its source list, at the end
-- workers take from, oldest first; the consumer's delivery tags are returned so the caller restores those
-- messages from kombu's unacked hash (kombu's own restore); then the consumer is forgotten.
-- A consumer is dead when its heartbeat key (a TTL on Redis's clock) is gone.
-- Key names are derived here from the prefix and suffixes passed in (pipeline/keys.py), because the dead
-- consumers are only known inside the script; Sluice runs each broker on a single Redis (kombu needs one
-- anyway), never on Redis Cluster.
-- KEYS[1]  the consumers set
-- KEYS[2]  the reaper lock: one scan of the registry at a time, across every consumer
-- ARGV[1]  fetch key prefix, "sluice:fetch:"
-- ARGV[2]  the most consumers to reap in one call
-- ARGV[3]  one consumer id to release now, alive or not (a clean close); "" to reap the dead
-- ARGV[4]  the lock's time, ms: how often the registry is scanned at most
-- ARGV[5..8] the suffixes of a consumer's keys after prefix .. consumer (keys.FETCH_SUFFIXES): its heartbeat,
--          its processing lists (before the source list's name), its sources set, its tags set
-- Returns  {{consumer, messages moved back, {tags}}, ...}
local alive, processing_of, sources, tags_of = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local consumers = {}
if ARGV[3] ~= '' then
  consumers = {ARGV[3]}
else
  if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', tonumber(ARGV[4])) then
    return {}
  end
  for _, consumer in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    if #consumers >= tonumber(ARGV[2]) then
      break
    end
    if redis.call('EXISTS', ARGV[1] .. consumer .. alive) == 0 then
      table.insert(consumers, consumer)
    end
  end
end
local reaped = {}
for _, consumer in ipairs(consumers) do
  local base = ARGV[1] .. consumer
  local moved = 0
  for _, source in ipairs(redis.call('SMEMBERS', base .. sources)) do
    local processing = base .. processing_of .. source
    while redis.call('LMOVE', processing, source, 'LEFT', 'RIGHT') do
      moved = moved + 1
    end
  end
  local tags = redis.call('SMEMBERS', base .. tags_of)
  redis.call('DEL', base .. sources, base .. tags_of, base .. alive)
  redis.call('SREM', KEYS[1], consumer)
  table.insert(reaped, {consumer, moved, tags})
end
return reaped
