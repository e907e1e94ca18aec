-- One event's admission, shared by admit_event.lua (one event) and admit_batch.lua (many of one class, one round
-- trip): the caller's idempotency key replayed, or the user's preferences, quiet hours, cadence and throttle, then the
-- queue's bound, then the fold store's, and the key recorded. Defines one function, taking all it reads as parameters
-- (a script includes depth, wire, fold_fields, fold and bounded before this one):
--   admit_one(c, k, a, lists, first, now, known) -> the reply's fields (a table for encode_reply), or an error reply
--     c      the kind's constants (include/wire.lua read_request)
--     k      the event's keys by name, as admit_event.lua's KEYS (counters, pending, size, overflow, trigger,
--            preferences, throttle, fold_entity, fold_kind, fold_user, idempotency)
--     a      its arguments by name, as admit_event.lua's ARGV (message, payload, member_entity, member_kind,
--            member_user, entity, notification, idempotency_ttl); a batch's event has parts, body and tag instead of
--            message (admit_batch.lua)
--     lists  a table holding the queue's list and its priority sub-lists from index first on (its depth)
--     now    Redis's clock, in seconds
--     known  nil, or a batch's table that keeps the queue's depth once read (only the batch pushes onto the queue
--            while its script runs), so each event after the first reads no lengths (include/bounded.lua push)
-- What each outcome means, and what a key records, is said in admit_event.lua's header. Each decision is written to
-- the activity log in the same step (include/activity.lua, included before this one: k.activity, c.activity), with
-- a.user and a.title; a critical that waits for room (full) is written by what its wait comes to.
-- A batch's users mostly share a plan (their kind's default): each text is decoded once a call.
local decoded_plans = {}
local function plan_of(text)
  local found = decoded_plans[text]
  if not found then
    local instant, digest, strict = decode_plan(text)
    found = {instant, digest, strict}
    decoded_plans[text] = found
  end
  return found[1], found[2], found[3]
end

-- Why an event was held, and until when: set by admit, read by the activity entry of the same event.
local noted = {hold = '', due = 0}

-- Admission itself: the reply's fields (a table), or an error reply.
local function admit(c, k, a, lists, first, now, known)
  local klass = c.class
  noted.hold, noted.due = '', 0

  -- The user's choices, read once: the kind's plan, the quiet intervals, the cadence ticks, and for an inbox item's
  -- escalation what the user's rows make of its channels outside the kind (a plan of those channels alone).
  local mirrored = redis.call('HMGET', k.preferences, c.mirror.plan, c.mirror.quiet, c.mirror.cadence,
    c.mirror.escalation)
  local plan = mirrored[1] or c.default_plan
  local instant, digest, strict = plan_of(plan)
  if not instant then
    return redis.error_reply('admission: not a plan: ' .. plan)
  end

  -- An inbox item's escalation (notifications/inbox/escalation.py, c.escalate its channels) is admitted once however
  -- many drainers take it over: it comes with an idempotency key of its own (admit_one replays it). The user's plan for
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
    local p = a.parts
    if p then
      -- A batch's event: its message joined from the parts its events share (pipeline.broker.message.batch_envelope).
      local id = a.notification
      return p[1] .. a.body .. p[2] .. id .. p[3] .. id .. p[4] .. header .. p[5] .. id .. p[6] .. a.tag .. p[7]
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
      local pushed = push(lists, first, c, k.counters, message, known)
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
  noted.hold, noted.due = hold, due
  if c.elsewhere and (hold ~= '' or #digest > 0) then
    return {outcome = outcome, instant = instant_text, handover = {
      hold = hold, due = due, digest = table.concat(digest, ','), digest_due = digest_due}}
  end
  if hold == '' and #digest == 0 then
    -- Nothing to fold: the reply finish() would give, without making the fold's closures.
    return {outcome = outcome, flush = 0, instant = instant_text, reason = '', grain = ''}
  end
  return fold_store(c, k, a, now)(outcome, instant, instant_text, hold, due, digest, digest_due)
end

-- The activity entry's outcome, reason, detail and fold key for a reply (pipeline/activity_fields.py names them);
-- nil for a critical that waits for room: what its wait comes to is written then.
local function decision(c, a, reply)
  local outcome, reason = reply.outcome, reply.reason or ''
  if outcome == 'full' then
    return nil
  end
  if outcome == 'ceiling' or outcome == 'overflow_full' or outcome == 'store_full' then
    return 'rejected', outcome, '', ''
  end
  if reply.handover then
    -- Folded on the digest's own Redis: what it comes to there, as the key records it.
    local held = reply.handover.hold
    if held ~= '' or not outcome then
      outcome = c.class == 'routine' and 'folded' or 'collapsed'
      reason = held ~= '' and held or 'preference'
    end
  end
  local fold = ''
  if reply.grain and reply.grain ~= '' then
    fold = a['member_' .. reply.grain] or ''
  end
  if outcome == 'deferred' then
    return 'deferred', 'overflow', '', ''
  end
  if reason == 'quiet' or reason == 'cadence' then
    return 'deferred', reason, tostring(noted.due), fold
  end
  if reason == 'throttle' then
    return 'throttled', reason, '', fold
  end
  return outcome or '', reason, '', fold
end

local function log_decision(c, k, a, outcome, reason, detail, fold)
  activity_add(c.activity, k.activity, {user = a.user, kind = c.kind, entity = a.entity, notification = a.notification,
    klass = c.class, outcome = outcome, reason = reason, detail = detail, fold = fold, title = a.title})
end

local function admit_one(c, k, a, lists, first, now, known)
  local ttl = tonumber(a.idempotency_ttl)
  if ttl > 0 then
    local recorded = replayed(k.idempotency, k.counters, c.replay_field)
    if recorded then
      log_decision(c, k, a, 'replayed', '', recorded, '')
      return {outcome = recorded, replayed = 1}
    end
  end
  local reply = admit(c, k, a, lists, first, now, known)
  if reply.err then
    return reply
  end
  if c.activity then
    local outcome, reason, detail, fold = decision(c, a, reply)
    if outcome then
      log_decision(c, k, a, outcome, reason, detail, fold)
    end
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
  return reply
end
