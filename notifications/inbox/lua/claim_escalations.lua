-- Take up to ARGV[3] escalations for one drainer: first those whose drainer's lease ran out (it died or stalled),
-- then those due in the escalation set; each moves to the claimed set under a fresh lease. An item stays in the
-- claimed set until its drainer finished it (escalated or cancelled), so a drainer killed mid-drain loses none.
-- KEYS[1]  the class's escalation set (pipeline.redis.keys.inbox_escalations): item id -> due time
-- KEYS[2]  the class's claimed set (pipeline.redis.keys.inbox_escalating): item id -> lease expiry
-- ARGV[1]  now, seconds since the epoch
-- ARGV[2]  the lease, seconds
-- ARGV[3]  the most items to take
-- Returns  the item ids taken
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
