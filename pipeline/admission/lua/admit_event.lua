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
--           touched, without a key); then
--           the queue's list and its priority sub-lists (its depth). pending, size, trigger and the fold hashes are
--           a placeholder, never touched, when the folds live on another Redis (c.elsewhere).
-- ARGV      layout (the KEYS and ARGV names); constants (the kind's: bounds, plan, counter fields' prefixes, the mirror's
--           fields); message (with c.placeholder where the channels header goes); payload (JSON);
--           member_entity, member_kind, member_user (the pending members of the three grains); entity;
--           notification (the throttle log's member); idempotency_ttl (seconds the key is kept; 0: the call has
--           no key)
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
local c, k, a, queue_keys = read_request(KEYS, ARGV)
local ttl = tonumber(a.idempotency_ttl)
if ttl > 0 then
  local recorded = replayed(k.idempotency, k.counters, c.replay_field)
  if recorded then
    return encode_reply({outcome = recorded, replayed = 1})
  end
end

-- Admission itself: the reply's fields (a table), or an error reply.
local function admit()
  local t = redis.call('TIME')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  local klass = c.class

  -- The user's choices, read once: the kind's plan, the quiet intervals, the cadence ticks, and for an inbox item's
  -- escalation what the user's rows make of its channels outside the kind (a plan of those channels alone).
  local mirrored = redis.call('HMGET', k.preferences, c.mirror.plan, c.mirror.quiet, c.mirror.cadence,
    c.mirror.escalation)
  local plan = mirrored[1] or c.default_plan
  local instant, digest, strict = decode_plan(plan)
  if not instant then
    return redis.error_reply('admission: not a plan: ' .. plan)
  end

  -- An inbox item's escalation (notifications/inbox/escalation.py, c.escalate its channels) is admitted once however
  -- many drainers take it over: it comes with an idempotency key of its own, recorded above. The user's plan for
  -- the kind is narrowed to the escalation's channels: a channel of the kind keeps the user's choice (instant,
  -- digest or off); a channel
  -- outside the kind, which the user cannot choose for the kind itself, goes as their rows for its category or every
  -- kind decide it (the mirror's escalation plan, written only for a user who chose something), else as the kind goes
  -- for them: into their digest when they take the kind only as a digest, else at once. Quiet hours, cadence,
  -- throttle and the bounds then hold it as any event.
  local function narrowed(escalate, kind_channels, chosen)
    local function has(list, name)
      for _, item in ipairs(list) do
        if item == name then
          return true
        end
      end
      return false
    end
    local as_digest = #instant == 0 and #digest > 0
    local chosen_instant, chosen_digest
    if chosen then
      chosen_instant, chosen_digest = decode_plan(chosen)
    end
    local now_list, later_list = {}, {}
    for _, channel in ipairs(escalate) do
      if has(kind_channels, channel) then
        if has(instant, channel) then
          table.insert(now_list, channel)
        elseif has(digest, channel) then
          table.insert(later_list, channel)
        end
      elseif chosen_instant then
        -- The user's rows decided it: at once, in the digest, or (in neither list) off.
        if has(chosen_instant, channel) then
          table.insert(now_list, channel)
        elseif has(chosen_digest, channel) then
          table.insert(later_list, channel)
        end
      elseif as_digest then
        table.insert(later_list, channel)
      else
        table.insert(now_list, channel)
      end
    end
    return now_list, later_list
  end
  local escalation = c.escalate ~= ''
  if escalation then
    instant, digest = narrowed(split(c.escalate), split(c.channels), mirrored[4])
  end
  local instant_text = table.concat(instant, ',')
  if #instant == 0 and #digest == 0 then
    redis.call('HINCRBY', k.counters, c.counter_prefix .. 'suppressed', 1)
    return {outcome = 'suppressed', reason = 'off'}
  end

  -- The message with its channels header in place: null for every channel of the kind, else the list.
  local function filled()
    local header = 'null'
    if instant_text ~= c.channels or escalation then
      header = cjson.encode(instant)
    end
    local i, j = string.find(a.message, c.placeholder, 1, true)
    return string.sub(a.message, 1, i - 1) .. header .. string.sub(a.message, j + 1)
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
    if klass ~= 'critical' and not c.mandatory then
      for _, window in ipairs(split(mirrored[2])) do
        local s, e = string.match(window, '^(%d+)-(%d+)$')
        if tonumber(s) <= now and now < tonumber(e) then
          hold, due = 'quiet', tonumber(e)
          break
        end
      end
      if hold == '' and klass == 'routine' and not strict then
        local tick = next_tick()
        if tick then
          hold, due = 'cadence', tick
        end
      end
      if hold == '' and c.throttle_max > 0 then
        redis.call('ZREMRANGEBYSCORE', k.throttle, '-inf', now - c.throttle_s)
        if redis.call('ZCARD', k.throttle) >= c.throttle_max then
          hold = 'throttle'
        else
          redis.call('ZADD', k.throttle, now, a.notification)
          redis.call('EXPIRE', k.throttle, c.throttle_s + 1)
        end
      end
    end
    if hold == '' then
      local message = filled()
      local pushed = push(KEYS, queue_keys, c, k.counters, message)
      if pushed == 'ceiling' then
        return {outcome = 'ceiling', instant = instant_text}
      end
      if pushed == 'accepted' then
        outcome = 'accepted'
      elseif klass == 'critical' then
        return {outcome = 'full', instant = instant_text, message = message}
      elseif klass == 'routine' and strict then
        if redis.call('LLEN', k.overflow) >= c.overflow_capacity then
          redis.call('HINCRBY', k.counters, c.counter_prefix .. 'rejected', 1)
          return {outcome = 'overflow_full', instant = instant_text}
        end
        redis.call('RPUSH', k.overflow, message)
        redis.call('HINCRBY', k.counters, c.counter_prefix .. 'deferred', 1)
        outcome = 'deferred'
      else
        hold = 'overflow'
      end
    end
  end
  local digest_due = #digest > 0 and (next_tick() or now) or 0
  if c.elsewhere and (hold ~= '' or #digest > 0) then
    return {outcome = outcome, instant = instant_text, handover = {
      hold = hold, due = due, digest = table.concat(digest, ','), digest_due = digest_due}}
  end
  return fold_store(c, k, a, now)(outcome, instant, instant_text, hold, due, digest, digest_due)
end

local reply = admit()
if reply.err then
  return reply
end
if ttl > 0 then
  local outcome = reply.outcome
  if reply.handover then
    -- What fold_handed.lua comes to when it folds (include/fold.lua finish): the fold's, unless the instant part
    -- went out and is not held.
    local folded = c.class == 'routine' and 'folded' or 'collapsed'
    if reply.handover.hold ~= '' or not outcome then
      outcome = folded
    end
  end
  record(k.idempotency, outcome, ttl, c)
end
return encode_reply(reply)
