-- One step of giving back what a consumer of the reliable fetch holds (pipeline/broker/reaper.py calls it until "done"):
-- at most ARGV[2] messages move from its processing lists back to their source lists, at the end workers take from
-- (oldest first), and at most ARGV[2] of its delivery tags are popped for the caller to restore from kombu's
-- unacked hash (kombu's own restore). Once it holds nothing, it is forgotten. Every key name is passed in.
-- KEYS[1]          the consumers set (the reaper's registry)
-- KEYS[2]          the consumer's heartbeat key
-- KEYS[3]          the consumer's sources set
-- KEYS[4]          the consumer's delivery tags set
-- KEYS[5..n+4]     its source lists, as the caller read them from KEYS[3]
-- KEYS[n+5..2n+4]  its processing list for each source, in the same order
-- ARGV[1]          the consumer's id (its member in KEYS[1])
-- ARGV[2]          the most messages, and the most tags, this step moves
-- ARGV[3]          "1": release it alive or not (a clean stop, a batch that ended); "0": only if it is dead
-- Returns          {status, messages moved back, {tags}}; status "alive" (its heartbeat is back: left alone),
--                  "changed" (it registered other sources: read them again), "more" (call again) or "done"
local n = (#KEYS - 4) / 2
if ARGV[3] ~= '1' and redis.call('EXISTS', KEYS[2]) == 1 then
  return {'alive', 0, {}}
end
if redis.call('SCARD', KEYS[3]) ~= n then
  -- Sources are only ever added, by the consumer's own fetch: a count that differs means a set that differs.
  return {'changed', 0, {}}
end
local budget = tonumber(ARGV[2])
local moved = 0
for i = 1, n do
  while moved < budget and redis.call('LMOVE', KEYS[n + 4 + i], KEYS[4 + i], 'LEFT', 'RIGHT') do
    moved = moved + 1
  end
end
local tags = redis.call('SPOP', KEYS[4], budget)
if moved >= budget or #tags >= budget then
  return {'more', moved, tags}
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('SREM', KEYS[1], ARGV[1])
return {'done', moved, tags}
