-- The channel gate's decision for one send, shared by gate_acquire.lua (the gate alone) and claim_gate.lua (the
-- send claim and the gate in one round trip). K and A are the gate's keys and arguments, laid out as
-- gate_acquire.lua's KEYS and ARGV (its header says what each one is).
-- Returns 0 when granted (the caller holds a slot in each gate with a concurrency limit), else the ms to wait
-- before asking again. Time is Redis's own clock, so every worker shares one.
local function gate_grant(K, A)
  local t_now = redis.call('TIME')
  local now = tonumber(t_now[1]) * 1000 + math.floor(tonumber(t_now[2]) / 1000)
  local klass, rate, burst = A[1], tonumber(A[2]), tonumber(A[3])
  local limit, hold, share = tonumber(A[4]), tonumber(A[5]), tonumber(A[6])
  local lease, lease_ttl = A[7], tonumber(A[8])
  local whole = #K >= 6
  local TAU_MS = 5000

  redis.call('ZREMRANGEBYSCORE', K[2], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', K[3], '-inf', now)
  local s = redis.call('HMGET', K[1], 'tk', 'ts', 'cl', 'r', 't', 'dts')
  local tokens = tonumber(s[1]) or burst
  local last = tonumber(s[2]) or now
  local last_critical = tonumber(s[3]) or -1
  local routine, total = tonumber(s[4]) or 0, tonumber(s[5]) or 0
  local decay = math.exp(-(now - (tonumber(s[6]) or now)) / TAU_MS)
  routine, total = routine * decay, total * decay
  if rate > 0 then
    tokens = math.min(burst, tokens + (now - last) * rate / 1000)
  end
  local interval = rate > 0 and math.ceil(1000 / rate) or 10

  local w_rate, w_burst, w_limit, w_tokens = 0, 1, 0, 0
  if whole then
    w_rate, w_burst, w_limit = tonumber(A[9]), tonumber(A[10]), tonumber(A[11])
    redis.call('ZREMRANGEBYSCORE', K[5], '-inf', now)
    redis.call('ZREMRANGEBYSCORE', K[6], '-inf', now)
    local w = redis.call('HMGET', K[4], 'tk', 'ts')
    w_tokens = tonumber(w[1]) or w_burst
    if w_rate > 0 then
      w_tokens = math.min(w_burst, w_tokens + (now - (tonumber(w[2]) or now)) * w_rate / 1000)
    end
  end

  local function save()
    redis.call('HSET', K[1], 'tk', tokens, 'ts', now, 'cl', last_critical, 'r', routine, 't', total, 'dts', now)
    redis.call('PEXPIRE', K[1], 3600000)
  end

  -- on_whole: the wait is for the whole channel's room, so lower classes of every partition hold back.
  local function wait(ms, on_whole)
    if klass == 'critical' then
      redis.call('ZADD', K[2], now + ms + 250, lease)
      redis.call('PEXPIRE', K[2], 3600000)
      if on_whole then
        redis.call('ZADD', K[5], now + ms + 250, lease)
        redis.call('PEXPIRE', K[5], 3600000)
      end
    end
    save()
    return math.max(1, ms)
  end

  if klass ~= 'critical' then
    local waiting = redis.call('ZCARD', K[2]) > 0 or (whole and redis.call('ZCARD', K[5]) > 0)
    local holding = last_critical >= 0 and now - last_critical < hold
    if waiting or holding then
      local owed = klass == 'routine' and share > 0 and (total < 1 or routine / total < share)
      if not owed then
        if holding and not waiting then
          return wait(hold - (now - last_critical), false)
        end
        return wait(interval, false)
      end
    end
  end
  if rate > 0 and tokens < 1 then
    return wait(math.ceil((1 - tokens) * 1000 / rate), false)
  end
  if limit > 0 and redis.call('ZCARD', K[3]) >= limit then
    return wait(10, false)
  end
  if whole then
    if w_rate > 0 and w_tokens < 1 then
      return wait(math.ceil((1 - w_tokens) * 1000 / w_rate), true)
    end
    if w_limit > 0 and redis.call('ZCARD', K[6]) >= w_limit then
      return wait(10, true)
    end
  end
  if rate > 0 then
    tokens = tokens - 1
  end
  total = total + 1
  if klass == 'routine' then
    routine = routine + 1
  end
  if klass == 'critical' then
    last_critical = now
    redis.call('ZREM', K[2], lease)
  end
  if limit > 0 then
    redis.call('ZADD', K[3], now + lease_ttl, lease)
    redis.call('PEXPIRE', K[3], 3600000)
  end
  if whole then
    if klass == 'critical' then
      redis.call('ZREM', K[5], lease)
    end
    if w_rate > 0 then
      w_tokens = w_tokens - 1
    end
    redis.call('HSET', K[4], 'tk', w_tokens, 'ts', now)
    redis.call('PEXPIRE', K[4], 3600000)
    if w_limit > 0 then
      redis.call('ZADD', K[6], now + lease_ttl, lease)
      redis.call('PEXPIRE', K[6], 3600000)
    end
  end
  save()
  return 0
end
