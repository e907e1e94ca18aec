-- Admit one event in one round trip (two when it folds on the digest's own Redis): the user's preferences, quiet
-- hours, cadence and throttle, then the queue's bound, then the fold store's. Admission's runner
-- (pipeline/admission/runner.py) hands over everything the decision needs as data (the kind's default plan and
-- constants, the user's mirrored choices); this script applies it atomically.
--
-- Every input and the reply are admission's wire formats (pipeline/admission/wire.py owns them; include/wire.lua
-- reads and writes them here), by name:
-- KEYS      counters (hash); pending (zset of fold members by when due); size (the fold store's size hash);
--           overflow (the class's list of strict users' messages while the queue is full); trigger (the
--           size-trigger flag); preferences (the user's mirrored hash); throttle (the user's log for this kind);
--           fold_entity, fold_kind, fold_user (the fold hashes of the three grains); idempotency (the caller's
--           idempotency key, or an inbox item's escalation's: its first call's outcome; a placeholder, never
--           touched, without a key); activity (the activity log's capped stream: one entry per decision, written
--           while c.activity is set, include/activity.lua); then
--           the queue's list and its priority sub-lists (its depth). pending, size, trigger and the fold hashes are
--           a placeholder, never touched, when the folds live on another Redis (c.elsewhere).
-- ARGV      layout (the KEYS and ARGV names); constants (the kind's: bounds, plan, counter fields' prefixes, the mirror's
--           fields); message (with c.placeholder where the channels header goes); payload (JSON);
--           member_entity, member_kind, member_user (the pending members of the three grains); entity;
--           notification (the throttle log's member); idempotency_ttl (seconds the key is kept; 0: the call has
--           no key); user and title (what the activity log's entry names: the user's id, the payload's title or "")
-- Returns   the reply (JSON): outcome accepted, folded, collapsed, deferred, suppressed, full (critical: wait;
--           with the filled message), ceiling, overflow_full or store_full; flush (1: start a size-triggered
--           flush); instant (the instant channels); reason and grain of a fold. With the folds on another Redis
--           and something to fold, nothing is folded here: outcome is what went out so far (accepted, deferred or
--           absent) and handover says what fold_handed.lua folds there. replayed (1) when the idempotency key was
--           recorded already: outcome is then the first call's, and nothing else was done.
--
-- A plan is "instant channels|digest channels|strict"; strict means the user chose "instant" themselves, so the
-- event is never folded, even when the queue is full (it waits in the overflow). Fold keys come in three grains;
-- a new key takes the finest grain the store's bound allows (include/fold.lua).
--
-- An idempotency key records the outcome (the event was taken in some form: the outcomes c.recorded names) for
-- idempotency_ttl seconds, in this same step; a refusal (full, ceiling, overflow_full, store_full) records nothing,
-- so the caller's retry is decided afresh. With a handover, the outcome the fold will come to is recorded now
-- (pipeline/admission/runner.py deletes it if fold_handed.lua refuses the fold). The value is the outcome's name,
-- the only field of a key this script owns.
--
--! include depth
-- depth(lists, first): the summed lengths of lists[first..#lists] (pipeline/lua/include/depth.lua)
--! include wire
-- read_request, encode_reply, split, decode_plan (include/wire.lua)
--! include fold_fields
-- FOLD, SIZE: the fold hash's and the size hash's field names (pipeline/lua/include/fold_fields.lua)
--! include fold
-- fold_store(c, k, a, now) -> finish(...) (include/fold.lua)
--! include bounded
-- replayed, push, record: the key replayed, the bound and the push, the key recorded (include/bounded.lua)
--! include activity
-- activity_add(log, key, values): one entry of the activity log (pipeline/lua/include/activity.lua)
--! include admit
-- admit_one(c, k, a, lists, first, now): the decision itself (include/admit.lua)
local c, k, a, first = read_request(KEYS, ARGV)
local t = redis.call('TIME')
local reply = admit_one(c, k, a, KEYS, first, tonumber(t[1]) + tonumber(t[2]) / 1000000)
if reply.err then
  return reply
end
return encode_reply(reply)
