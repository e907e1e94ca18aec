-- Force a provider's circuit breaker open or closed (staff: a provider in maintenance), or hand it back to the
-- automatic rules, in one atomic step.
-- KEYS[1]  the breaker hash (see breaker_allow.lua)
-- KEYS[2]  its probe leases
-- KEYS[3]  the counters hash
-- ARGV[1]  "open", "closed", or "" to stop forcing (the breaker restarts closed, with an empty window)
-- ARGV[2]  counter field prefix of sluice_provider_transitions_total
-- Returns  the state in effect now
local before = redis.call('HGET', KEYS[1], 'forced') or redis.call('HGET', KEYS[1], 'state') or 'closed'
local after
if ARGV[1] == '' then
  local fields = redis.call('HKEYS', KEYS[1])
  for _, name in ipairs(fields) do
    redis.call('HDEL', KEYS[1], name)
  end
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'state', 'closed')
  after = 'closed'
else
  redis.call('HSET', KEYS[1], 'forced', ARGV[1])
  after = ARGV[1]
end
if after ~= before then
  redis.call('HINCRBY', KEYS[3], ARGV[2] .. after, 1)
end
return after
