-- Fold an event on the digest's own Redis (SLUICE_DIGEST["redis_url"]): the second half of an admission whose
-- first half, admit_event.lua on the class's Redis, decided what to fold and handed it over (its reply's
-- handover). The fold, the store's bound and the reply are include/fold.lua's, shared with admit_event.lua.
-- Inputs and reply by name (pipeline/admission/wire.py owns the formats; include/wire.lua reads them here):
-- KEYS      counters (of this Redis: the exporter sums every Redis's); pending; size; trigger; fold_entity,
--           fold_kind, fold_user (as admit_event.lua's)
-- ARGV      layout; constants (the kind's, as admit_event.lua's); payload; member_entity, member_kind,
--           member_user; entity; handed (admit_event.lua's reply as it came: outcome so far, instant channels,
--           and handover: hold and due of the instant part, digest channels and their due time)
-- Returns   the reply, as admit_event.lua's
--! include wire
-- read_request, encode_reply, split (include/wire.lua)
--! include fold_fields
-- FOLD, SIZE: the fold hash's and the size hash's field names (pipeline/lua/include/fold_fields.lua)
--! include fold
-- fold_store(c, k, a, now) -> finish(...) (include/fold.lua)
local c, k, a = read_request(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local handed = cjson.decode(a.handed)
local h = handed.handover
local instant = handed.instant or ''
return encode_reply(fold_store(c, k, a, now)(handed.outcome, split(instant), instant, h.hold, h.due,
  split(h.digest), h.digest_due))
