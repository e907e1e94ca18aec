-- Report one call's result to a provider's circuit breaker, and move the breaker on, in one atomic step.
-- KEYS[1]  the breaker hash (see breaker_allow.lua)
-- KEYS[2]  its probe leases
-- KEYS[3]  the counters hash
-- ARGV[1]  now, ms (the caller's clock)
-- ARGV[2]  "ok" (the provider answered properly, even to refuse the recipient) or "fail"
-- ARGV[3]  "1" when the call was slow (longer than slow_call_s), else "0"
-- ARGV[4]  the probe's lease id, or "" for an ordinary call
-- ARGV[5]  bucket width, ms (the window is ARGV[6] buckets)
-- ARGV[6]  buckets in the window
-- ARGV[7]  the fewest calls in the window that may open the breaker
-- ARGV[8]  open at this share of failed calls
-- ARGV[9]  open at this share of slow calls
-- ARGV[10] probes per half-open round
-- ARGV[11] close when at most this share of a round's probes failed or were slow
-- ARGV[12] minimum time open, ms (doubled after each failed round, up to ARGV[13])
-- ARGV[13] maximum time open, ms
-- ARGV[14] counter field prefix of sluice_provider_transitions_total
-- ARGV[15] counter field of sluice_provider_calls_total for this call's outcome
-- ARGV[16] open after this many failed calls in a row (0: never)
-- Returns  the breaker's state after the call: "closed", "open" or "half_open" (a forced breaker: the forcing)
local now = tonumber(ARGV[1])
local bad = ARGV[2] == 'fail'
local slow = ARGV[3] == '1'
redis.call('HINCRBY', KEYS[3], ARGV[15], 1)

-- The window: buckets of ARGV[5] ms; those that slid out are dropped whatever the state, so the hash stays small.
local bucket = math.floor(now / tonumber(ARGV[5]))
redis.call('HINCRBY', KEYS[1], 'c:' .. bucket, 1)
if bad then redis.call('HINCRBY', KEYS[1], 'f:' .. bucket, 1) end
if slow then redis.call('HINCRBY', KEYS[1], 's:' .. bucket, 1) end
local first = bucket - tonumber(ARGV[6]) + 1
local calls, fails, slows = 0, 0, 0
-- Failed calls in a row, across every worker: a provider that is down fails them all.
local streak = 0
if bad then
  streak = redis.call('HINCRBY', KEYS[1], 'streak', 1)
else
  redis.call('HSET', KEYS[1], 'streak', 0)
end
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local which, n = string.match(fields[i], '^([cfs]):(%-?%d+)$')
  if which then
    if tonumber(n) < first then
      redis.call('HDEL', KEYS[1], fields[i])
    elseif which == 'c' then
      calls = calls + tonumber(fields[i + 1])
    elseif which == 'f' then
      fails = fails + tonumber(fields[i + 1])
    else
      slows = slows + tonumber(fields[i + 1])
    end
  end
end

local forced = redis.call('HGET', KEYS[1], 'forced')
if forced then
  return forced  -- staff decide while it is forced; the window still shows how the provider does
end

local function open(after_failed_round)
  local open_ms = tonumber(ARGV[12])
  if after_failed_round then
    open_ms = math.min((tonumber(redis.call('HGET', KEYS[1], 'open_ms')) or open_ms) * 2, tonumber(ARGV[13]))
  end
  redis.call('HSET', KEYS[1], 'state', 'open', 'opened_at', now, 'open_ms', open_ms, 'streak', 0)
  redis.call('HDEL', KEYS[1], 'probe_ok', 'probe_bad')
  redis.call('DEL', KEYS[2])
  redis.call('HINCRBY', KEYS[3], ARGV[14] .. 'open', 1)
  return 'open'
end

local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
if state == 'half_open' then
  -- Only this round's probes decide; a late answer from before the breaker opened does not.
  if ARGV[4] == '' or redis.call('ZREM', KEYS[2], ARGV[4]) == 0 then
    return state
  end
  redis.call('HINCRBY', KEYS[1], (bad or slow) and 'probe_bad' or 'probe_ok', 1)
  local probes = tonumber(ARGV[10])
  local failed = tonumber(redis.call('HGET', KEYS[1], 'probe_bad')) or 0
  local passed = tonumber(redis.call('HGET', KEYS[1], 'probe_ok')) or 0
  if failed > math.floor(tonumber(ARGV[11]) * probes + 1e-9) then
    return open(true)
  end
  if failed + passed < probes then
    return state
  end
  -- Recovered: close with an empty window, so the failures that opened it are not held against it, and
  -- the next opening needs a full min_calls of fresh evidence.
  for i = 1, #fields, 2 do
    if string.match(fields[i], '^[cfs]:') then
      redis.call('HDEL', KEYS[1], fields[i])
    end
  end
  redis.call('HSET', KEYS[1], 'state', 'closed', 'streak', 0)
  redis.call('HDEL', KEYS[1], 'probe_ok', 'probe_bad', 'opened_at', 'open_ms')
  redis.call('HINCRBY', KEYS[3], ARGV[14] .. 'closed', 1)
  return 'closed'
end
if state == 'open' then
  return state
end
local in_a_row = tonumber(ARGV[16])
if in_a_row > 0 and streak >= in_a_row then
  return open(false)
end
if calls >= tonumber(ARGV[7])
  and (fails >= tonumber(ARGV[8]) * calls or slows >= tonumber(ARGV[9]) * calls) then
  return open(false)
end
return 'closed'
