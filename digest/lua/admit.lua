-- Admit one event in one round trip: the user's preferences, quiet hours, cadence and throttle, then the queue's
-- bound, then the fold store's. The face's class policy (notifications/policy.py) hands over its decision as
-- data (the kind's default plan, the user's mirrored choices); this script applies it atomically.
--
-- A plan is "instant channels|digest channels|strict", channels comma-separated; strict (1) means the user
-- chose "instant" themselves, so the event is never folded, even when the queue is full (it waits in the
-- overflow). The mirror (notifications/preferences.py) keeps per user: k:<kind> -> plan, q -> quiet intervals
-- "start-end,..." and c -> cadence ticks "t,...", all in UTC seconds.
--
-- Fold keys come in three grains: user|kind|entity, user|kind and user. A new key takes the finest grain the
-- store's bound allows (below half of it, then below 80%, then below the bound); an existing key of any grain
-- takes the event first. So the store grows with what callers send only while it is small, and then with
-- the number of users.
--
-- KEYS[1]   counters hash
-- KEYS[2]   pending folds: zset of members scored by when they are due
-- KEYS[3]   the fold store's size: k (keys), b (payload bytes)
-- KEYS[4]   the class's overflow list (strict users' messages while the queue is full)
-- KEYS[5]   size-trigger flag
-- KEYS[6]   the user's mirrored preferences hash
-- KEYS[7]   the user's throttle log for this kind (zset)
-- KEYS[8]   fold hash, grain user|kind|entity
-- KEYS[9]   fold hash, grain user|kind
-- KEYS[10]  fold hash, grain user
-- KEYS[11..] the queue's list, then its priority sub-lists (its depth)
-- ARGV[1]   the kind's constants, ";"-separated (digest/store.py, cached per kind): class; kind; capacity;
--           ceiling; default plan; mandatory (1/0); throttle max (0: none); throttle window, s; due keys that
--           trigger a flush; overflow capacity; fold store bound in keys; in bytes; size-trigger TTL, s; the
--           placeholder in the message where the instant channels go; all the kind's channels, ","-separated
-- ARGV[2]   the message, with the placeholder standing where the instant channels go (JSON, or null for all)
-- ARGV[3]   the payload, JSON
-- ARGV[4..6] the pending members of the three grains
-- ARGV[7]   entity id
-- ARGV[8]   notification id (the throttle log's member)
-- Returns   "outcome|flush|instant channels|reason|grain" (one string: the hot path parses the least it can)
--           outcome: 1 accepted, 2 folded, 3 collapsed, 4 deferred, 5 suppressed, 0 full (critical: wait),
--           -1 at the ceiling, -2 rejected (the overflow is full), -3 refused (the fold store is full)
--! include depth
local c = {}
for field in string.gmatch(ARGV[1], '[^;]+') do
  table.insert(c, field)
end
local klass, kind, capacity, ceiling, default_plan = c[1], c[2], tonumber(c[3]), tonumber(c[4]), c[5]
local mandatory, throttle_max, throttle_s = c[6], tonumber(c[7]), tonumber(c[8])
local trigger_keys, overflow_cap, max_k, max_b, trigger_ttl = tonumber(c[9]), tonumber(c[10]), tonumber(c[11]),
  tonumber(c[12]), tonumber(c[13])
local placeholder, all_channels = c[14], c[15]
local message, payload, entity, notification = ARGV[2], ARGV[3], ARGV[7], ARGV[8]
local prefix = 'notifications:' .. klass .. ':'

local function reply(outcome, flush, channels, reason, grain)
  return outcome .. '|' .. flush .. '|' .. channels .. '|' .. reason .. '|' .. grain
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000

local function split(text)
  local out = {}
  for item in string.gmatch(text or '', '[^,]+') do
    table.insert(out, item)
  end
  return out
end

-- The user's choices, read once: the kind's plan, the quiet intervals, the cadence ticks.
local mirrored = redis.call('HMGET', KEYS[6], 'k:' .. kind, 'q', 'c')
local plan = mirrored[1] or default_plan
local instant_text, digest_text, strict = string.match(plan, '^([^|]*)|([^|]*)|(%d)$')
local instant, digest = split(instant_text), split(digest_text)
if #instant == 0 and #digest == 0 then
  redis.call('HINCRBY', KEYS[1], prefix .. 'suppressed', 1)
  return reply(5, 0, '', 'off', '')
end

local function channels_json(list)
  if table.concat(list, ',') == all_channels then
    return 'null'
  end
  return '["' .. table.concat(list, '","') .. '"]'
end

local flush = 0
local grains = {'entity', 'kind', 'user'}

local function fold(list, reason, due)
  local g
  for i = 1, 3 do
    if redis.call('EXISTS', KEYS[7 + i]) == 1 then
      g = i
      break
    end
  end
  local size = #payload
  if not g then
    local stored = redis.call('HMGET', KEYS[3], 'k', 'b')
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
    redis.call('HINCRBY', KEYS[3], 'k', 1)
  end
  local key, member = KEYS[7 + g], ARGV[3 + g]
  local delta = size - redis.call('HSTRLEN', key, 'p')
  redis.call('HINCRBY', key, 'n', 1)
  redis.call('HSET', key, 'p', payload, 'l', now, 'k', kind, 'r', reason)
  redis.call('HSETNX', key, 'f', now)
  for _, channel in ipairs(list) do
    redis.call('HSET', key, 'c:' .. channel, 1)
  end
  if g > 1 then
    -- A coarse fold counts the distinct entities (and kinds) it holds, remembering up to 100 of them.
    if redis.call('HGET', key, 'e:' .. entity) == false then
      if tonumber(redis.call('HINCRBY', key, 'ec', 1)) <= 100 then
        redis.call('HSET', key, 'e:' .. entity, 1)
        delta = delta + #entity
      end
    end
    if g == 3 and redis.call('HSETNX', key, 'kk:' .. kind, 1) == 1 then
      redis.call('HINCRBY', key, 'kc', 1)
    end
  end
  redis.call('HINCRBY', key, 'z', delta)
  redis.call('HINCRBY', KEYS[3], 'b', delta)
  if redis.call('ZSCORE', KEYS[2], member) then
    redis.call('ZADD', KEYS[2], 'GT', due, member)  -- held longer, never released earlier
  else
    redis.call('ZADD', KEYS[2], due, member)
  end
  redis.call('HINCRBY', KEYS[1], 'folds:' .. klass .. ':' .. reason, 1)
  redis.call('HINCRBY', KEYS[1], 'foldgrain:' .. klass .. ':' .. grains[g], 1)
  if redis.call('ZCOUNT', KEYS[2], '-inf', now) >= trigger_keys and
     redis.call('SET', KEYS[5], now, 'NX', 'EX', trigger_ttl) then
    flush = 1
  end
  return g
end

local function next_tick()
  for _, tick in ipairs(split(mirrored[3])) do
    if tonumber(tick) > now then
      return tonumber(tick)
    end
  end
  return nil
end

local folded_code = klass == 'routine' and 2 or 3
local outcome, reason, grain = nil, '', ''
if #instant > 0 then
  local hold, due = nil, now
  if klass ~= 'critical' and mandatory ~= '1' then
    for _, window in ipairs(split(mirrored[2])) do
      local s, e = string.match(window, '^(%d+)-(%d+)$')
      if tonumber(s) <= now and now < tonumber(e) then
        hold, due = 'quiet', tonumber(e)
        break
      end
    end
    if not hold and klass == 'routine' and strict ~= '1' then
      local tick = next_tick()
      if tick then
        hold, due = 'cadence', tick
      end
    end
    if not hold and throttle_max > 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now - throttle_s)
      if redis.call('ZCARD', KEYS[7]) >= throttle_max then
        hold = 'throttle'
      else
        redis.call('ZADD', KEYS[7], now, notification)
        redis.call('EXPIRE', KEYS[7], throttle_s + 1)
      end
    end
  end
  if not hold then
    local d = depth(11)
    if d >= ceiling then
      return reply(-1, 0, instant_text, '', '')
    end
    local function filled()
      local i, j = string.find(message, placeholder, 1, true)
      return string.sub(message, 1, i - 1) .. channels_json(instant) .. string.sub(message, j + 1)
    end
    if d < capacity then
      redis.call('LPUSH', KEYS[11], filled())
      redis.call('HINCRBY', KEYS[1], prefix .. 'accepted', 1)
      outcome = 1
    elseif klass == 'critical' then
      return reply(0, 0, instant_text, '', '')
    elseif klass == 'routine' and strict == '1' then
      if redis.call('LLEN', KEYS[4]) >= overflow_cap then
        redis.call('HINCRBY', KEYS[1], prefix .. 'rejected', 1)
        return reply(-2, 0, instant_text, '', '')
      end
      redis.call('RPUSH', KEYS[4], filled())
      redis.call('HINCRBY', KEYS[1], prefix .. 'deferred', 1)
      outcome = 4
    else
      hold = 'overflow'
    end
  end
  if hold then
    local g = fold(instant, hold, due)
    if not g then
      redis.call('HINCRBY', KEYS[1], prefix .. 'rejected', 1)
      return reply(-3, 0, instant_text, hold, '')
    end
    outcome, reason, grain = folded_code, hold, grains[g]
  end
end
if #digest > 0 then
  local g = fold(digest, 'preference', next_tick() or now)
  if not g and not outcome then
    redis.call('HINCRBY', KEYS[1], prefix .. 'rejected', 1)
    return reply(-3, 0, '', 'preference', '')
  end
  if not g then
    -- The instant part went out; the digest part found the store full: counted, never silent.
    redis.call('HINCRBY', KEYS[1], 'folds:' .. klass .. ':refused', 1)
  elseif not outcome then
    outcome, reason, grain = folded_code, 'preference', grains[g]
  end
end
if outcome == 2 or outcome == 3 then
  redis.call('HINCRBY', KEYS[1], prefix .. (outcome == 2 and 'folded' or 'collapsed'), 1)
end
return reply(outcome, flush, instant_text, reason, grain)
