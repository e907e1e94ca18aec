-- Ask a shared channel for one send: a token bucket and a concurrency limit, with critical first.
-- On a partitioned channel (partition_by) KEYS[1..3] are the partition's and KEYS[4..6] the whole channel's:
-- a send needs room in both, so distinct partition values never add up to more than the channel allows.
-- KEYS[1]  the gate's state hash: tk (tokens), ts (last refill), cl (last critical grant),
--          r and t (routine and total grants, decaying averages), dts (when they last decayed)
-- KEYS[2]  zset of critical sends waiting for this gate: lease id -> expiry (ms)
-- KEYS[3]  zset of sends holding a concurrency slot: lease id -> expiry (ms)
-- KEYS[4]  (partitioned only) the whole channel's bucket hash: tk (tokens), ts (last refill)
-- KEYS[5]  (partitioned only) zset of critical sends waiting for the whole channel's room
-- KEYS[6]  (partitioned only) zset of sends holding one of the whole channel's concurrency slots
-- ARGV[1]  class: critical, routine or background
-- ARGV[2]  rate, sends per second (0: no rate limit)
-- ARGV[3]  burst: the most tokens the bucket holds
-- ARGV[4]  concurrency limit (0: none)
-- ARGV[5]  hold window (ms) after the last critical grant, during which lower classes wait
-- ARGV[6]  routine's minimum share of grants, 0 to 1
-- ARGV[7]  lease id of this send
-- ARGV[8]  lease TTL (ms): a holder that died frees its slot after this
-- ARGV[9]  (partitioned only) the whole channel's rate (0: none)
-- ARGV[10] (partitioned only) the whole channel's burst
-- ARGV[11] (partitioned only) the whole channel's concurrency limit (0: none)
-- Returns  0 when granted (the caller holds a slot in each gate with a concurrency limit), else the ms to
--          wait before asking again. Time is Redis's own clock, so every worker shares one.
local t_now = redis.call('TIME')
local now = tonumber(t_now[1]) * 1000 + math.floor(tonumber(t_now[2]) / 1000)
local klass, rate, burst = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local limit, hold, share = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local lease, lease_ttl = ARGV[7], tonumber(ARGV[8])
local whole = #KEYS >= 6
local TAU_MS = 5000

redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local s = redis.call('HMGET', KEYS[1], 'tk', 'ts', 'cl', 'r', 't', 'dts')
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
  w_rate, w_burst, w_limit = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
  local w = redis.call('HMGET', KEYS[4], 'tk', 'ts')
  w_tokens = tonumber(w[1]) or w_burst
  if w_rate > 0 then
    w_tokens = math.min(w_burst, w_tokens + (now - (tonumber(w[2]) or now)) * w_rate / 1000)
  end
end

local function save()
  redis.call('HSET', KEYS[1], 'tk', tokens, 'ts', now, 'cl', last_critical, 'r', routine, 't', total, 'dts', now)
  redis.call('PEXPIRE', KEYS[1], 3600000)
end

-- on_whole: the wait is for the whole channel's room, so lower classes of every partition hold back.
local function wait(ms, on_whole)
  if klass == 'critical' then
    redis.call('ZADD', KEYS[2], now + ms + 250, lease)
    redis.call('PEXPIRE', KEYS[2], 3600000)
    if on_whole then
      redis.call('ZADD', KEYS[5], now + ms + 250, lease)
      redis.call('PEXPIRE', KEYS[5], 3600000)
    end
  end
  save()
  return math.max(1, ms)
end

if klass ~= 'critical' then
  local waiting = redis.call('ZCARD', KEYS[2]) > 0 or (whole and redis.call('ZCARD', KEYS[5]) > 0)
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
if limit > 0 and redis.call('ZCARD', KEYS[3]) >= limit then
  return wait(10, false)
end
if whole then
  if w_rate > 0 and w_tokens < 1 then
    return wait(math.ceil((1 - w_tokens) * 1000 / w_rate), true)
  end
  if w_limit > 0 and redis.call('ZCARD', KEYS[6]) >= w_limit then
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
  redis.call('ZREM', KEYS[2], lease)
end
if limit > 0 then
  redis.call('ZADD', KEYS[3], now + lease_ttl, lease)
  redis.call('PEXPIRE', KEYS[3], 3600000)
end
if whole then
  if klass == 'critical' then
    redis.call('ZREM', KEYS[5], lease)
  end
  if w_rate > 0 then
    w_tokens = w_tokens - 1
  end
  redis.call('HSET', KEYS[4], 'tk', w_tokens, 'ts', now)
  redis.call('PEXPIRE', KEYS[4], 3600000)
  if w_limit > 0 then
    redis.call('ZADD', KEYS[6], now + lease_ttl, lease)
    redis.call('PEXPIRE', KEYS[6], 3600000)
  end
end
save()
return 0
