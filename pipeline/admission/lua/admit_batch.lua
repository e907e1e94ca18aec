-- Admit many events of one class in one round trip: each exactly as admit_event.lua admits one (include/admit.lua),
-- in order, so a full queue takes the first that fit. notify_many() sends a chunk of users (one kind, one entity, one
-- payload: sent once); an inbox drain's batch sends events of several kinds. Admission's runner
-- (pipeline/admission/runner.py, admit_many) bounds a batch (wire.MAX_BATCH events), so its run time is bounded.
--
-- Inputs and reply by name (pipeline/admission/wire.py owns the formats; include/wire.lua reads them here):
-- KEYS      the batch's shared keys (layout.keys: counters, pending, size, overflow, trigger, activity, as admit_event.lua's);
--           then the queue's list and its priority sub-lists (ARGV lists of them); then each event's own keys
--           (layout.event_keys: preferences, throttle, fold_entity, fold_kind, fold_user, idempotency)
-- ARGV      layout (the names of all of these); lists (how many queue lists); constants, payloads, parts (how many
--           kinds' constants, payloads and messages' shared parts follow); tally (a counter field's prefix: each event
--           taken is counted under it by its outcome, for a fan-out; '' for none); then the constants, the payloads and the
--           parts (each a JSON array, pipeline.broker.message.batch_envelope); then each event's own arguments
--           (layout.event_args: parts, constants and payload, indexes into those lists from 1; body and tag, what
--           its message's parts are joined with; entity, member_entity, member_kind, member_user, notification,
--           idempotency_ttl, user, title)
-- Returns   a JSON array: each event's reply, in order, as admit_event.lua's; an event whose user's mirror holds no
--           plan is {"outcome": "error", "error": ...}, the others admitted all the same. An event that waits for
--           room (full) or is refused is not tallied: its caller counts what becomes of it
--
--! include depth
-- depth(lists, first): the summed lengths of lists[first..#lists] (pipeline/lua/include/depth.lua)
--! include wire
-- encode_reply, split, decode_plan (include/wire.lua)
--! include fold_fields
-- FOLD, SIZE: the fold hash's and the size hash's field names (pipeline/lua/include/fold_fields.lua)
--! include fold
-- fold_store(c, k, a, now) -> finish(...) (include/fold.lua)
--! include bounded
-- replayed, push, record (include/bounded.lua)
--! include activity
-- activity_add(log, key, values): one entry of the activity log (pipeline/lua/include/activity.lua)
--! include admit
-- admit_one(c, k, a, lists, first, now): the decision itself (include/admit.lua)
local layout = cjson.decode(ARGV[1])
local n_lists, n_constants, n_payloads = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n_parts, tally = tonumber(ARGV[5]), ARGV[6]
local shared = {}
for i, name in ipairs(layout.keys) do
  shared[name] = KEYS[i]
end
local lists, first = {}, 1
for i = 1, n_lists do
  lists[i] = KEYS[#layout.keys + i]
end
local constants, payloads, parts = {}, {}, {}
for i = 1, n_constants do
  constants[i] = cjson.decode(ARGV[6 + i])
end
for i = 1, n_payloads do
  payloads[i] = ARGV[6 + n_constants + i]
end
for i = 1, n_parts do
  parts[i] = cjson.decode(ARGV[6 + n_constants + n_payloads + i])
end

local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local per_key, per_arg = #layout.event_keys, #layout.event_args
local key_base, arg_base = #layout.keys + n_lists, 6 + n_constants + n_payloads + n_parts
local replies, known = {}, {}
local shared_keys = {__index = shared}
for e = 1, (#ARGV - arg_base) / per_arg do
  local k, a = setmetatable({}, shared_keys), {}
  for i, name in ipairs(layout.event_keys) do
    k[name] = KEYS[key_base + (e - 1) * per_key + i]
  end
  for i, name in ipairs(layout.event_args) do
    a[name] = ARGV[arg_base + (e - 1) * per_arg + i]
  end
  a.payload = payloads[tonumber(a.payload)]
  a.parts = parts[tonumber(a.parts)]
  local reply = admit_one(constants[tonumber(a.constants)], k, a, lists, first, now, known)
  if reply.err then
    reply = {outcome = 'error', error = reply.err}
  end
  replies[e] = reply
end
if tally ~= '' then
  -- A fan-out's users by outcome (sluice_fanout_users_total), counted in this same step: each outcome once.
  local counts = {}
  for _, reply in ipairs(replies) do
    local outcome = reply.outcome
    for _, name in ipairs(constants[1].recorded) do
      if name == outcome then
        counts[outcome] = (counts[outcome] or 0) + 1
      end
    end
  end
  for outcome, n in pairs(counts) do
    redis.call('HINCRBY', shared.counters, tally .. outcome, n)
  end
end
return cjson.encode(replies)
