-- Ask a provider's circuit breaker whether one call may go to the provider, in one atomic step.
-- KEYS[1]  the breaker (pipeline.redis.keys.breaker): hash of state, forced, opened_at, open_ms, probe_ok, probe_bad,
--          and the window's buckets c:<n> (calls), f:<n> (failed), s:<n> (slow): its fields are the breaker
--          scripts' own (breaker_allow, breaker_record, breaker_force), spelt in them and nowhere else
-- KEYS[2]  its probe leases (pipeline.redis.keys.breaker_probes): zset of lease id -> when the lease ends, ms
-- KEYS[3]  the counters hash
-- ARGV[1]  now, ms (the caller's clock: workers pass wall time, tests a clock they control)
-- ARGV[2]  probes per half-open round
-- ARGV[3]  a probe's lease, ms (longer than any call, so a prober that died frees its slot after it)
-- ARGV[4]  the lease id this call gets if it is a probe
-- ARGV[5]  counter field prefix of sluice_provider_transitions_total (the new state is appended)
-- ARGV[6]  counter field of the calls skipped because the breaker said no
-- Returns  {1, "closed", 0} go ahead; {1, "probe", 0} go ahead as a probe (report it with the lease id);
--          {0, "open" | "half_open", ms} do not call this provider now: an open breaker lets probes through in
--          ms (-1: forced open, no telling), a half-open one has its probes in flight (0).
local now = tonumber(ARGV[1])
local forced = redis.call('HGET', KEYS[1], 'forced')
if forced == 'closed' then
  return {1, 'closed', 0}
end
if forced == 'open' then
  redis.call('HINCRBY', KEYS[3], ARGV[6], 1)
  return {0, 'open', -1}
end
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
if state == 'closed' then
  return {1, 'closed', 0}
end
if state == 'open' then
  local opened = tonumber(redis.call('HGET', KEYS[1], 'opened_at')) or 0
  local open_ms = tonumber(redis.call('HGET', KEYS[1], 'open_ms')) or 0
  if now < opened + open_ms then
    redis.call('HINCRBY', KEYS[3], ARGV[6], 1)
    return {0, 'open', opened + open_ms - now}
  end
  -- Open long enough: the first caller after that turns it half-open, and the round of probes starts.
  redis.call('HSET', KEYS[1], 'state', 'half_open', 'probe_ok', 0, 'probe_bad', 0)
  redis.call('DEL', KEYS[2])
  redis.call('HINCRBY', KEYS[3], ARGV[5] .. 'half_open', 1)
end
-- Half-open: a round has a fixed number of probes, counting the ones answered and the ones in flight.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local answered = (tonumber(redis.call('HGET', KEYS[1], 'probe_ok')) or 0)
  + (tonumber(redis.call('HGET', KEYS[1], 'probe_bad')) or 0)
if redis.call('ZCARD', KEYS[2]) + answered < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[4])
  return {1, 'probe', 0}
end
redis.call('HINCRBY', KEYS[3], ARGV[6], 1)
return {0, 'half_open', 0}
