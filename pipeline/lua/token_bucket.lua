-- Take requests from a token bucket (an ingest token's, a user's preference changes): refill by elapsed time, then
-- spend them if there are enough.
-- Time is Redis's own clock (TIME), so every web pod sees one bucket whatever its own clock says.
-- KEYS[1]  the token's bucket hash (pipeline.redis.keys.ingest_rate): t (tokens left), ts (last refill, seconds)
-- ARGV[1]  refill rate, tokens per second (> 0)
-- ARGV[2]  burst: the bucket's size, and so the most requests in one instant
-- ARGV[3]  cost: how many requests this one counts for; 1 when absent
-- ARGV[4]  the tokens the bucket must hold for it to be allowed: the cost (at most the burst) when absent; 0 for a
--          charge that is always allowed (a fan-out's users, after its request was), leaving the bucket in debt so
--          the next requests wait for it to refill
-- Returns  {1, 0} allowed; {0, wait_ms} refused, where wait_ms is how long until there are enough tokens
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or '1')
local needed = tonumber(ARGV[4] or math.min(cost, burst))
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
if tokens >= needed then
  tokens = tokens - cost
  allowed = 1
else
  wait_ms = math.ceil((needed - tokens) / rate * 1000)
end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'ts', tostring(now))
-- Past this a full bucket is the same as no bucket, so an idle token costs no memory.
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - math.min(tokens, 0)) / rate * 1000) + 1000)
return {allowed, wait_ms}
