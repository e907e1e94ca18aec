-- Record a caller's idempotency key with an outcome and publish nothing (pipeline/admission/idempotency.py): what ingest does
-- for an unknown user when its token may not learn so, so that the key is recorded and replayed as a real event's.
-- KEYS[1]   the counters hash
-- KEYS[2]   the caller's idempotency key (a placeholder, never touched, when ARGV[2] is 0)
-- ARGV[1]   the outcome to record (its name)
-- ARGV[2]   seconds the key keeps it; 0: the call has no key
-- ARGV[3]   the counter field to increment when the key was recorded already (a replay)
-- Returns   the outcome the key holds already (a replay: nothing recorded), or false (recorded now, or no key)
--! include bounded
-- replayed(key, counters, replay_field): the recorded outcome, the replay counted; or nil (include/bounded.lua)
local ttl = tonumber(ARGV[2])
if ttl == 0 then
  return false
end
local recorded = replayed(KEYS[2], KEYS[1], ARGV[3])
if recorded then
  return recorded
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ttl)
return false
