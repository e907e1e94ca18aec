-- A caller's idempotency key looked up: the outcome its first call recorded at ``key``, the replay counted in the
-- ``counters`` hash's ``replay_field``; or nil when the key is new. Every script that records a key looks it up
-- this way (one definition).
local function replayed(key, counters, replay_field)
  local recorded = redis.call('GET', key)
  if recorded then
    redis.call('HINCRBY', counters, replay_field, 1)
  end
  return recorded or nil
end
