-- Ask a shared channel for one send: a token bucket and a concurrency limit, with critical first.
-- KEYS[1]  the gate's state hash: tk (tokens), ts (last refill), cl (last critical grant),
--          r and t (routine and total grants, decaying averages), dts (when they last decayed)
-- KEYS[2]  zset of critical sends waiting for this gate: lease id -> expiry (ms)
-- KEYS[3]  zset of sends holding a concurrency slot: lease id -> expiry (ms)
-- ARGV[1]  class: critical, routine or background
-- ARGV[2]  rate, sends per second (0: no rate limit)
-- ARGV[3]  burst: the most tokens the bucket holds
-- ARGV[4]  concurrency limit (0: none)
-- ARGV[5]  hold window (ms) after the last critical grant, during which lower classes wait
-- ARGV[6]  routine's minimum share of grants, 0 to 1
-- ARGV[7]  lease id of this send
-- ARGV[8]  lease TTL (ms): a holder that died frees its slot after this
-- Returns  0 when granted (the caller holds a slot if concurrency is limited), else the ms to wait
--          before asking again. Time is Redis's own clock, so every worker shares one.
local t_now = redis.call('TIME')
local now = tonumber(t_now[1]) * 1000 + math.floor(tonumber(t_now[2]) / 1000)
local klass, rate, burst = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local limit, hold, share = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local lease, lease_ttl = ARGV[7], tonumber(ARGV[8])
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

local function save()
  redis.call('HSET', KEYS[1], 'tk', tokens, 'ts', now, 'cl', last_critical, 'r', routine, 't', total, 'dts', now)
  redis.call('PEXPIRE', KEYS[1], 3600000)
end

local function wait(ms)
  if klass == 'critical' then
    redis.call('ZADD', KEYS[2], now + ms + 250, lease)
    redis.call('PEXPIRE', KEYS[2], 3600000)
  end
  save()
  return math.max(1, ms)
end

if klass ~= 'critical' then
  local waiting = redis.call('ZCARD', KEYS[2]) > 0
  local holding = last_critical >= 0 and now - last_critical < hold
  if waiting or holding then
    local owed = klass == 'routine' and share > 0 and (total < 1 or routine / total < share)
    if not owed then
      if holding and not waiting then
        return wait(hold - (now - last_critical))
      end
      return wait(interval)
    end
  end
end
if rate > 0 and tokens < 1 then
  return wait(math.ceil((1 - tokens) * 1000 / rate))
end
if limit > 0 and redis.call('ZCARD', KEYS[3]) >= limit then
  return wait(10)
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
save()
return 0
