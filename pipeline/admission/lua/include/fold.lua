-- The fold itself, shared by admit_event.lua (a class that keeps its folds on its own Redis) and fold_handed.lua
-- (on the digest's Redis, SLUICE_DIGEST["redis_url"]). Defines one function, taking all it reads as parameters:
--   fold_store(c, k, a, now) -> finish(outcome, instant, instant_text, hold, due, digest, digest_due)
--     c    the kind's constants (include/wire.lua read_request): class, kind, the bounds, the counter fields' prefixes
--     k    KEYS by name: counters, pending, size, trigger, fold_entity, fold_kind, fold_user
--     a    ARGV by name: payload, entity, member_entity, member_kind, member_user
--     now  Redis's clock, in seconds
--   finish returns the reply's fields (a table for encode_reply).
-- The fold's hash and the store's size hash are named by FOLD and SIZE (pipeline/lua/include/fold_fields.lua, which
-- a script includes before this one); digest/fold_store.py reads them back by the same names.
local function fold_store(c, k, a, now)
  local grain_keys = {k.fold_entity, k.fold_kind, k.fold_user}
  local members = {a.member_entity, a.member_kind, a.member_user}
  local grains = {'entity', 'kind', 'user'}
  local payload, entity, kind = a.payload, a.entity, c.kind
  local max_k, max_b = c.max_fold_keys, c.max_fold_bytes
  local flush = 0

  -- Fold the event into the finest grain the store's bound allows; the grain's index, or nil when it is full.
  local function fold(list, reason, due)
    local g
    for i = 1, 3 do
      if redis.call('EXISTS', grain_keys[i]) == 1 then
        g = i
        break
      end
    end
    local size = #payload
    if not g then
      local stored = redis.call('HMGET', k.size, SIZE.keys, SIZE.bytes)
      local keys_now, bytes_now = tonumber(stored[1]) or 0, tonumber(stored[2]) or 0
      if keys_now < max_k * 0.5 and bytes_now + size < max_b * 0.5 then
        g = 1
      elseif keys_now < max_k * 0.8 and bytes_now + size < max_b * 0.8 then
        g = 2
      elseif keys_now < max_k and bytes_now + size <= max_b then
        g = 3
      else
        return nil
      end
      redis.call('HINCRBY', k.size, SIZE.keys, 1)
    end
    local key, member = grain_keys[g], members[g]
    -- What this event adds to the store's bytes is charged against the bound too, for a key that exists as for a
    -- new one: a bigger payload that does not fit leaves the smaller one in place, and an entity id that does not
    -- fit is counted and not remembered. So the store's bytes never pass max_b.
    local b = tonumber(redis.call('HGET', k.size, SIZE.bytes)) or 0
    local delta = size - redis.call('HSTRLEN', key, FOLD.payload)
    local keep_payload = delta > 0 and b + delta > max_b
    if keep_payload then
      delta = 0
    end
    local remember = false
    if g > 1 and redis.call('HGET', key, FOLD.entity .. entity) == false then
      -- A coarse fold counts the distinct entities (and kinds) it holds, remembering up to 100 of them.
      remember = tonumber(redis.call('HINCRBY', key, FOLD.entities, 1)) <= 100 and b + delta + #entity <= max_b
    end
    redis.call('HINCRBY', key, FOLD.count, 1)
    if not keep_payload then
      redis.call('HSET', key, FOLD.payload, payload)
    end
    redis.call('HSET', key, FOLD.last_seen, now, FOLD.kind, kind, FOLD.reason, reason)
    redis.call('HSETNX', key, FOLD.first_seen, now)
    for _, channel in ipairs(list) do
      redis.call('HSET', key, FOLD.channel .. channel, 1)
    end
    if remember then
      redis.call('HSET', key, FOLD.entity .. entity, 1)
      delta = delta + #entity
    end
    if g == 3 and redis.call('HSETNX', key, FOLD.kind_seen .. kind, 1) == 1 then
      redis.call('HINCRBY', key, FOLD.kinds, 1)
    end
    redis.call('HINCRBY', key, FOLD.bytes, delta)
    redis.call('HINCRBY', k.size, SIZE.bytes, delta)
    if redis.call('ZSCORE', k.pending, member) then
      redis.call('ZADD', k.pending, 'GT', due, member)  -- held longer, never released earlier
    else
      redis.call('ZADD', k.pending, due, member)
    end
    redis.call('HINCRBY', k.counters, c.fold_prefix .. reason, 1)
    redis.call('HINCRBY', k.counters, c.grain_prefix .. grains[g], 1)
    if redis.call('ZCOUNT', k.pending, '-inf', now) >= c.trigger_keys and
       redis.call('SET', k.trigger, now, 'NX', 'EX', c.trigger_ttl_s) then
      flush = 1
    end
    return g
  end

  -- What admission decided, folded: the instant part when it is held (hold: quiet, cadence, throttle or
  -- overflow; '' when it went out or there is none), then the digest part (the user's digest channels). outcome
  -- is what the instant part already came to ('accepted' or 'deferred'), nil when nothing went out.
  local function finish(outcome, instant, instant_text, hold, due, digest, digest_due)
    local folded = c.class == 'routine' and 'folded' or 'collapsed'
    local reason, grain = '', ''
    if hold ~= '' then
      local g = fold(instant, hold, due)
      if not g then
        redis.call('HINCRBY', k.counters, c.counter_prefix .. 'rejected', 1)
        return {outcome = 'store_full', instant = instant_text, reason = hold}
      end
      outcome, reason, grain = folded, hold, grains[g]
    end
    if #digest > 0 then
      local g = fold(digest, 'preference', digest_due)
      if not g and not outcome then
        redis.call('HINCRBY', k.counters, c.counter_prefix .. 'rejected', 1)
        return {outcome = 'store_full', reason = 'preference'}
      end
      if not g then
        -- The instant part went out; the digest part found the store full: counted, never silent.
        redis.call('HINCRBY', k.counters, c.fold_prefix .. 'refused', 1)
      elseif not outcome then
        outcome, reason, grain = folded, 'preference', grains[g]
      end
    end
    if outcome == 'folded' or outcome == 'collapsed' then
      redis.call('HINCRBY', k.counters, c.counter_prefix .. outcome, 1)
    end
    return {outcome = outcome, flush = flush, instant = instant_text, reason = reason, grain = grain}
  end

  return finish
end
