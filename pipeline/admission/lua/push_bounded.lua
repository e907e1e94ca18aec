-- The bounded push of critical events that found their queue full and wait for room (pipeline/admission/
-- bounded_push.py): the same bound as their admission (include/bounded.lua), in one atomic step, in order, so the
-- first that fit go in. One event waiting (notify()) or many (notify_many()'s remainder), one round trip.
-- Inputs and reply by name (pipeline/admission/wire.py owns the formats; include/wire.lua reads them here):
-- KEYS      the shared keys (layout.keys: counters); then the queue's list and its priority sub-lists (ARGV lists
--           of them: its depth); then each event's own (layout.event_keys: idempotency, the caller's key, or a
--           placeholder, never touched, without one)
-- ARGV      layout (the names of all of these); constants (the kind's, as admit_event.lua's); lists (how many queue
--           lists); then each event's own (layout.event_args: message, with its channels filled in as
--           admit_event.lua's full reply gave it; idempotency_ttl, seconds the key keeps "accepted", 0: no key)
-- Returns   a JSON array: each event's reply (as admit_event.lua's): outcome accepted, full or ceiling; or the outcome
--           its key recorded already (a concurrent call with the same key got in first), with replayed, nothing
--           pushed. Once one is full, the rest are full too: none is pushed past one that did not fit.
--! include depth
-- depth(lists, first): the summed lengths of lists[first..#lists] (pipeline/lua/include/depth.lua)
--! include bounded
-- replayed, push, record (include/bounded.lua)
local layout = cjson.decode(ARGV[1])
local c = cjson.decode(ARGV[2])
local n_lists = tonumber(ARGV[3])
local shared = {}
for i, name in ipairs(layout.keys) do
  shared[name] = KEYS[i]
end
local lists = {}
for i = 1, n_lists do
  lists[i] = KEYS[#layout.keys + i]
end
local per_key, per_arg = #layout.event_keys, #layout.event_args
local key_base, arg_base = #layout.keys + n_lists, 3
local replies, stopped, known = {}, nil, {}
for e = 1, (#ARGV - arg_base) / per_arg do
  local k, a = {}, {}
  for i, name in ipairs(layout.event_keys) do
    k[name] = KEYS[key_base + (e - 1) * per_key + i]
  end
  for i, name in ipairs(layout.event_args) do
    a[name] = ARGV[arg_base + (e - 1) * per_arg + i]
  end
  local ttl = tonumber(a.idempotency_ttl)
  local recorded = ttl > 0 and replayed(k.idempotency, shared.counters, c.replay_field)
  if recorded then
    replies[e] = {outcome = recorded, replayed = 1}
  elseif stopped then
    replies[e] = {outcome = stopped}
  else
    local outcome = push(lists, 1, c, shared.counters, a.message, known)
    if outcome ~= 'accepted' then
      stopped = outcome
    elseif ttl > 0 then
      record(k.idempotency, outcome, ttl, c)
    end
    replies[e] = {outcome = outcome}
  end
end
return cjson.encode(replies)
