-- The fold itself, shared by admit.lua (a class that keeps its folds on its own Redis) and fold.lua (on the
-- digest's Redis, SLUICE_DIGEST["redis_url"]). The including script sets, before this line:
--   payload, entity        the event's payload (JSON) and entity id
--   FK                     the fold store's keys: counters, pending, size, trigger, and grains = the fold hashes
--                          of user|kind|entity, user|kind and user
--   FM                     the pending members of those three grains
-- ARGV[1] is the kind's constants in both scripts (digest/store.py): they are parsed here.
local c = {}
for field in string.gmatch(ARGV[1], '[^;]+') do
  table.insert(c, field)
end
local klass, kind, capacity, ceiling, default_plan = c[1], c[2], tonumber(c[3]), tonumber(c[4]), c[5]
local mandatory, throttle_max, throttle_s = c[6], tonumber(c[7]), tonumber(c[8])
local trigger_keys, overflow_cap, max_k, max_b, trigger_ttl = tonumber(c[9]), tonumber(c[10]), tonumber(c[11]),
  tonumber(c[12]), tonumber(c[13])
local placeholder, all_channels, elsewhere = c[14], c[15], c[16]
local prefix = 'notifications:' .. klass .. ':'
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000

local function reply(outcome, flush, channels, reason, grain)
  return outcome .. '|' .. flush .. '|' .. channels .. '|' .. reason .. '|' .. grain
end

local function split(text)
  local out = {}
  for item in string.gmatch(text or '', '[^,]+') do
    table.insert(out, item)
  end
  return out
end

local flush = 0
local grains = {'entity', 'kind', 'user'}

-- Fold the event into the finest grain the store's bound allows; the grain's index, or nil when it is full.
local function fold(list, reason, due)
  local g
  for i = 1, 3 do
    if redis.call('EXISTS', FK.grains[i]) == 1 then
      g = i
      break
    end
  end
  local size = #payload
  if not g then
    local stored = redis.call('HMGET', FK.size, 'k', 'b')
    local k, b = tonumber(stored[1]) or 0, tonumber(stored[2]) or 0
    if k < max_k * 0.5 and b + size < max_b * 0.5 then
      g = 1
    elseif k < max_k * 0.8 and b + size < max_b * 0.8 then
      g = 2
    elseif k < max_k and b + size <= max_b then
      g = 3
    else
      return nil
    end
    redis.call('HINCRBY', FK.size, 'k', 1)
  end
  local key, member = FK.grains[g], FM[g]
  -- What this event adds to the store's bytes is charged against the bound too, for a key that exists as for a new
  -- one: a bigger payload that does not fit leaves the smaller one in place, and an entity id that does not fit is
  -- counted and not remembered. So the store's bytes never pass max_b.
  local b = tonumber(redis.call('HGET', FK.size, 'b')) or 0
  local delta = size - redis.call('HSTRLEN', key, 'p')
  local keep_payload = delta > 0 and b + delta > max_b
  if keep_payload then
    delta = 0
  end
  local remember = false
  if g > 1 and redis.call('HGET', key, 'e:' .. entity) == false then
    -- A coarse fold counts the distinct entities (and kinds) it holds, remembering up to 100 of them.
    remember = tonumber(redis.call('HINCRBY', key, 'ec', 1)) <= 100 and b + delta + #entity <= max_b
  end
  redis.call('HINCRBY', key, 'n', 1)
  if not keep_payload then
    redis.call('HSET', key, 'p', payload)
  end
  redis.call('HSET', key, 'l', now, 'k', kind, 'r', reason)
  redis.call('HSETNX', key, 'f', now)
  for _, channel in ipairs(list) do
    redis.call('HSET', key, 'c:' .. channel, 1)
  end
  if remember then
    redis.call('HSET', key, 'e:' .. entity, 1)
    delta = delta + #entity
  end
  if g == 3 and redis.call('HSETNX', key, 'kk:' .. kind, 1) == 1 then
    redis.call('HINCRBY', key, 'kc', 1)
  end
  redis.call('HINCRBY', key, 'z', delta)
  redis.call('HINCRBY', FK.size, 'b', delta)
  if redis.call('ZSCORE', FK.pending, member) then
    redis.call('ZADD', FK.pending, 'GT', due, member)  -- held longer, never released earlier
  else
    redis.call('ZADD', FK.pending, due, member)
  end
  redis.call('HINCRBY', FK.counters, 'folds:' .. klass .. ':' .. reason, 1)
  redis.call('HINCRBY', FK.counters, 'foldgrain:' .. klass .. ':' .. grains[g], 1)
  if redis.call('ZCOUNT', FK.pending, '-inf', now) >= trigger_keys and
     redis.call('SET', FK.trigger, now, 'NX', 'EX', trigger_ttl) then
    flush = 1
  end
  return g
end

-- What admission decided, folded: the instant part when it is held (hold: quiet, cadence, throttle or
-- overflow; '' when it went out or there is none), then the digest part (the user's digest channels). outcome is
-- what the instant part already came to (1 accepted, 4 deferred), nil when nothing went out. Returns the reply.
local function finish(outcome, instant, instant_text, hold, due, digest, digest_due)
  local folded_code = klass == 'routine' and 2 or 3
  local reason, grain = '', ''
  if hold ~= '' then
    local g = fold(instant, hold, due)
    if not g then
      redis.call('HINCRBY', FK.counters, prefix .. 'rejected', 1)
      return reply(-3, 0, instant_text, hold, '')
    end
    outcome, reason, grain = folded_code, hold, grains[g]
  end
  if #digest > 0 then
    local g = fold(digest, 'preference', digest_due)
    if not g and not outcome then
      redis.call('HINCRBY', FK.counters, prefix .. 'rejected', 1)
      return reply(-3, 0, '', 'preference', '')
    end
    if not g then
      -- The instant part went out; the digest part found the store full: counted, never silent.
      redis.call('HINCRBY', FK.counters, 'folds:' .. klass .. ':refused', 1)
    elseif not outcome then
      outcome, reason, grain = folded_code, 'preference', grains[g]
    end
  end
  if outcome == 2 or outcome == 3 then
    redis.call('HINCRBY', FK.counters, prefix .. (outcome == 2 and 'folded' or 'collapsed'), 1)
  end
  return reply(outcome, flush, instant_text, reason, grain)
end
