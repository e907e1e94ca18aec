-- The bounded push of a critical event that found its queue full and waits for room (pipeline/admission/
-- bounded_push.py): the same bound as its admission (include/bounded.lua), in one atomic step.
-- Inputs and reply by name (pipeline/admission/wire.py owns the formats; include/wire.lua reads them here):
-- KEYS      counters; idempotency (the caller's key, or a placeholder, never touched, without one); then the queue's
--           list and its priority sub-lists (its depth)
-- ARGV      layout; constants (the kind's, as admit_event.lua's); message (with its channels filled in, as
--           admit_event.lua's full reply gave it); idempotency_ttl (seconds the key keeps "accepted"; 0: no key)
-- Returns   the reply (JSON, as admit_event.lua's): outcome accepted, full or ceiling; or the outcome the caller's key
--           recorded already (a concurrent call with the same key got in first), with replayed, nothing pushed
--! include depth
-- depth(lists, first): the summed lengths of lists[first..#lists] (pipeline/lua/include/depth.lua)
--! include wire
-- read_request, encode_reply (include/wire.lua)
--! include bounded
-- replayed, push, record (include/bounded.lua)
local c, k, a, first = read_request(KEYS, ARGV)
local ttl = tonumber(a.idempotency_ttl)
if ttl > 0 then
  local recorded = replayed(k.idempotency, k.counters, c.replay_field)
  if recorded then
    return encode_reply({outcome = recorded, replayed = 1})
  end
end
local outcome = push(KEYS, first, c, k.counters, a.message)
if ttl > 0 then
  record(k.idempotency, outcome, ttl, c)
end
return encode_reply({outcome = outcome})
