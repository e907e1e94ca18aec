-- Take one request from a token bucket (an ingest token's, a user's preference changes): refill by elapsed time, then spend one token if there is one.
-- Time is Redis's own clock (TIME), so every web pod sees one bucket whatever its own clock says.
-- KEYS[1]  the token's bucket hash (pipeline.redis.keys.ingest_rate): t (tokens left), ts (last refill, seconds)
-- ARGV[1]  refill rate, tokens per second (> 0)
-- ARGV[2]  burst: the bucket's size, and so the most requests in one instant
-- Returns  {1, 0} allowed; {0, wait_ms} refused, where wait_ms is how long until one token is back
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 't', 'ts')
local tokens = tonumber(state[1])
local last = tonumber(state[2])
if tokens == nil or last == nil then
  tokens = burst
else
  -- A clock that stepped back never drains the bucket; a smaller burst set in the admin takes effect at once.
  tokens = math.min(burst, tokens + math.max(0, now - last) * rate)
end
local allowed = 0
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait_ms = math.ceil((1 - tokens) / rate * 1000)
end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'ts', tostring(now))
-- Past this a full bucket is the same as no bucket, so an idle token costs no memory.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, wait_ms}
