-- Take up to ARGV[3] due members for one worker of a housekeeping queue (an inbox escalation, a scheduled send):
-- first those whose worker's lease ran out (it died or stalled), then those due in the due set; each moves to the
-- claimed set under a fresh lease. A member stays in the claimed set until its worker finished it, so a worker killed
-- mid-way loses none: once its lease runs out, the next one takes its members over.
-- KEYS[1]  the due set (member -> when it is due)
-- KEYS[2]  the claimed set (member -> lease expiry)
-- ARGV[1]  now, seconds since the epoch
-- ARGV[2]  the lease, seconds
-- ARGV[3]  the most members to take
-- Returns  the members taken
local now, lease, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local taken = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit - #taken)
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  table.insert(taken, id)
end
for _, id in ipairs(taken) do
  redis.call('ZADD', KEYS[2], now + lease, id)
end
return taken
