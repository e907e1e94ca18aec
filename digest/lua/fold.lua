-- Fold one event into the digest store, or park an opted-out user's routine event in the overflow.
-- KEYS[1]  pending: zset of fold keys, scored by first-seen time
-- KEYS[2]  the fold hash of this user|kind|entity: n (count), p (latest payload), f (first), l (last)
-- KEYS[3]  the counters hash
-- KEYS[4]  opt-out set: members are user ids, or "user|kind" for one kind
-- KEYS[5]  the class's overflow list (opted-out users' messages, in order)
-- KEYS[6]  size-trigger flag: set while a size-triggered flush is in flight
-- ARGV[1]  now (seconds, float)
-- ARGV[2]  the payload, JSON
-- ARGV[3]  the fold key (pending's member)
-- ARGV[4]  opt-out member "user" to test; empty for classes without opt-out (background)
-- ARGV[5]  opt-out member "user|kind" to test
-- ARGV[6]  the ready message, pushed to the overflow for an opted-out user
-- ARGV[7]  overflow capacity
-- ARGV[8]  max pending keys before a size-triggered flush
-- ARGV[9]  size-trigger flag TTL, seconds: a flush that died frees the trigger by itself
-- ARGV[10] counter field prefix, "notifications:<class>:"
-- ARGV[11] the outcome counted for a fold: "folded" (routine) or "collapsed" (background)
-- Returns  {code, pending}: 1 folded; 2 folded and the caller must enqueue a flush;
--          3 deferred to the overflow; 0 refused because the overflow is full too
if ARGV[4] ~= '' and (redis.call('SISMEMBER', KEYS[4], ARGV[4]) == 1 or
                      redis.call('SISMEMBER', KEYS[4], ARGV[5]) == 1) then
  if redis.call('LLEN', KEYS[5]) >= tonumber(ARGV[7]) then
    redis.call('HINCRBY', KEYS[3], ARGV[10] .. 'rejected', 1)
    return {0, redis.call('ZCARD', KEYS[1])}
  end
  redis.call('RPUSH', KEYS[5], ARGV[6])
  redis.call('HINCRBY', KEYS[3], ARGV[10] .. 'deferred', 1)
  return {3, redis.call('ZCARD', KEYS[1])}
end
redis.call('HINCRBY', KEYS[2], 'n', 1)
redis.call('HSET', KEYS[2], 'p', ARGV[2], 'l', ARGV[1])
if redis.call('HSETNX', KEYS[2], 'f', ARGV[1]) == 1 then
  redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[3])
end
redis.call('HINCRBY', KEYS[3], ARGV[10] .. ARGV[11], 1)
local pending = redis.call('ZCARD', KEYS[1])
if pending >= tonumber(ARGV[8]) and redis.call('SET', KEYS[6], ARGV[1], 'NX', 'EX', tonumber(ARGV[9])) then
  return {2, pending}
end
return {1, pending}
