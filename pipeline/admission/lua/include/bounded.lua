-- The bound at the broker, one definition for every script that pushes an admitted event (admit_event.lua) or a
-- waiting critical's retry (push_bounded.lua), or records a caller's key (record_key.lua). Defines, taking all they
-- read as parameters (c is the kind's constants, include/wire.lua):
--   replayed(key, counters, replay_field) -> the outcome a caller's idempotency key recorded, the replay counted in
--                                            the counters hash; nil when the key is new
--   push(lists, first, c, counters, message, known) -> 'accepted' (pushed onto lists[first], counted), 'full'
--                                            (the queue holds its capacity: nothing pushed) or 'ceiling' (its hard
--                                            ceiling); the depth is lists[first..] summed (needs include/depth.lua),
--                                            or known.depth when a batch's script read it already (known nil: read)
--   record(key, outcome, ttl, c)         -> the outcome kept at key for ttl seconds, when it is one the key records
--                                            (c.recorded: an event taken in some form); a refusal records nothing
local function replayed(key, counters, replay_field)
  local recorded = redis.call('GET', key)
  if recorded then
    redis.call('HINCRBY', counters, replay_field, 1)
  end
  return recorded or nil
end

local function push(lists, first, c, counters, message, known)
  local d = known and known.depth
  if not d then
    d = depth(lists, first)
    if known then
      known.depth = d
    end
  end
  if d >= c.ceiling then
    return 'ceiling'
  end
  if d >= c.capacity then
    return 'full'
  end
  redis.call('LPUSH', lists[first], message)
  if known then
    known.depth = d + 1
  end
  redis.call('HINCRBY', counters, c.counter_prefix .. 'accepted', 1)
  return 'accepted'
end

local function record(key, outcome, ttl, c)
  for _, name in ipairs(c.recorded) do
    if name == outcome then
      redis.call('SET', key, outcome, 'EX', ttl)
      return
    end
  end
end
