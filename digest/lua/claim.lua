-- Claim up to ARGV[4] pending fold keys that are due, for one flush: each fold hash is renamed under the flush
-- id, so a fold that arrives afterwards starts a fresh hash and lands in the next digest. Keys held for later
-- (quiet hours, a cadence) have a score in the future and stay pending.
-- Key names are derived here from the prefixes passed in (pipeline/redis/keys.py), because the members are only known
-- inside the script; Sluice runs each Redis on a single instance (kombu's needs one anyway), never on Redis Cluster.
-- KEYS[1]  pending zset: member -> when it is due
-- KEYS[2]  claims zset: flush id -> lease expiry
-- KEYS[3]  this flush's claim set (members it holds)
-- ARGV[1]  a pending fold's key, less its member (keys.fold(""))
-- ARGV[2]  flush id
-- ARGV[3]  lease expiry (seconds since the epoch): after it another flusher may take the claim over
-- ARGV[4]  the most keys to claim
-- ARGV[5]  a fold's key while this flush holds it, less its member (keys.claimed(flush id, ""))
-- Returns  the claimed members
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, member in ipairs(members) do
  redis.call('RENAME', ARGV[1] .. member, ARGV[5] .. member)
  redis.call('SADD', KEYS[3], member)
  redis.call('ZREM', KEYS[1], member)
end
if #members > 0 then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
end
return members
