-- Admit one event in one round trip (two when it folds on the digest's own Redis): the user's preferences, quiet
-- hours, cadence and throttle, then the queue's bound, then the fold store's. The face's class policy
-- (notifications/policy.py) hands over its decision as data (the kind's default plan, the user's mirrored
-- choices); this script applies it atomically.
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
--           (KEYS 2, 3, 5 and 8-10 are a placeholder, never touched, when the folds live on another Redis)
-- KEYS[11..] the queue's list, then its priority sub-lists (its depth)
-- ARGV[1]   the kind's constants, ";"-separated (digest/store.py, cached per kind): class; kind; capacity;
--           ceiling; default plan; mandatory (1/0); throttle max (0: none); throttle window, s; due keys that
--           trigger a flush; overflow capacity; fold store bound in keys; in bytes; size-trigger TTL, s; the
--           placeholder in the message where the instant channels go; all the kind's channels, ","-separated;
--           1 when the class's folds live on another Redis (0: here)
-- ARGV[2]   the message, with the placeholder standing where the instant channels go (JSON, or null for all)
-- ARGV[3]   the payload, JSON
-- ARGV[4..6] the pending members of the three grains
-- ARGV[7]   entity id
-- ARGV[8]   notification id (the throttle log's member)
-- Returns   "outcome|flush|instant channels|reason|grain" (one string: the hot path parses the least it can)
--           outcome: 1 accepted, 2 folded, 3 collapsed, 4 deferred, 5 suppressed, 0 full (critical: wait),
--           -1 at the ceiling, -2 rejected (the overflow is full), -3 refused (the fold store is full)
--           When the kind's constants say the folds live on another Redis (SLUICE_DIGEST["redis_url"]) and the
--           event is to be folded, nothing is folded here: "6|outcome so far|instant channels|hold|due|digest
--           channels|digest due" hands the fold to fold.lua on that Redis (outcome so far: 1, 4, or 0 for none).
--! include depth
local message, payload, entity, notification = ARGV[2], ARGV[3], ARGV[7], ARGV[8]
local FK = {counters = KEYS[1], pending = KEYS[2], size = KEYS[3], trigger = KEYS[5],
  grains = {KEYS[8], KEYS[9], KEYS[10]}}
local FM = {ARGV[4], ARGV[5], ARGV[6]}
--! include fold

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

local function next_tick()
  for _, tick in ipairs(split(mirrored[3])) do
    if tonumber(tick) > now then
      return tonumber(tick)
    end
  end
  return nil
end

local outcome, hold, due = nil, '', now
if #instant > 0 then
  if klass ~= 'critical' and mandatory ~= '1' then
    for _, window in ipairs(split(mirrored[2])) do
      local s, e = string.match(window, '^(%d+)-(%d+)$')
      if tonumber(s) <= now and now < tonumber(e) then
        hold, due = 'quiet', tonumber(e)
        break
      end
    end
    if hold == '' and klass == 'routine' and strict ~= '1' then
      local tick = next_tick()
      if tick then
        hold, due = 'cadence', tick
      end
    end
    if hold == '' and throttle_max > 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now - throttle_s)
      if redis.call('ZCARD', KEYS[7]) >= throttle_max then
        hold = 'throttle'
      else
        redis.call('ZADD', KEYS[7], now, notification)
        redis.call('EXPIRE', KEYS[7], throttle_s + 1)
      end
    end
  end
  if hold == '' then
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
end
local digest_due = #digest > 0 and (next_tick() or now) or 0
if elsewhere == '1' and (hold ~= '' or #digest > 0) then
  return table.concat({6, outcome or 0, instant_text, hold, due, digest_text, digest_due}, '|')
end
return finish(outcome, instant, instant_text, hold, due, digest, digest_due)
