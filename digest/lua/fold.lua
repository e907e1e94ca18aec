-- Fold an event on the digest's own Redis (SLUICE_DIGEST["redis_url"]): the second half of an admission whose
-- first half, admit.lua on the class's Redis, decided what to fold and handed it over (its reply 6). The fold,
-- the store's bound and the reply are admit.lua's own (include/fold.lua).
-- KEYS[1]   counters hash (of this Redis: the exporter sums every Redis's)
-- KEYS[2]   pending folds: zset of members scored by when they are due
-- KEYS[3]   the fold store's size: k (keys), b (payload bytes)
-- KEYS[4]   size-trigger flag
-- KEYS[5..7] fold hashes, grains user|kind|entity, user|kind, user
-- ARGV[1]   the kind's constants, as admit.lua's
-- ARGV[2]   the payload, JSON
-- ARGV[3..5] the pending members of the three grains
-- ARGV[6]   entity id
-- ARGV[7]   what the instant part came to on the class's Redis: 1 accepted, 4 deferred, 0 nothing went out
-- ARGV[8]   the instant channels (","-separated)
-- ARGV[9]   why the instant part is held ('' when it is not: it went out, or there is none), ARGV[10] its due time
-- ARGV[11]  the digest channels, ARGV[12] their due time
-- Returns   admit.lua's reply
local payload, entity = ARGV[2], ARGV[6]
local FK = {counters = KEYS[1], pending = KEYS[2], size = KEYS[3], trigger = KEYS[4],
  grains = {KEYS[5], KEYS[6], KEYS[7]}}
local FM = {ARGV[3], ARGV[4], ARGV[5]}
--! include fold
local outcome = tonumber(ARGV[7])
if outcome == 0 then
  outcome = nil
end
return finish(outcome, split(ARGV[8]), ARGV[8], ARGV[9], tonumber(ARGV[10]), split(ARGV[11]), tonumber(ARGV[12]))
