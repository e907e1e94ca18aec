-- Publish one claimed fold's digest on its class's Redis when the fold store is another Redis
-- (SLUICE_DIGEST["redis_url"]), marking it handed over in the same step. The claim is dropped on the store's
-- Redis afterwards (drop_claimed.lua); a flusher that dies in between leaves the claim, and whoever takes it over
-- finds the mark here and only drops the claim: each digest is published once.
-- KEYS[1]   the flush's handover marks (hash: member -> 1)
-- KEYS[2]   the counters hash
-- KEYS[3]   the target queue's list
-- KEYS[4..] the queue's priority sub-lists, counted in the depth
-- ARGV[1]   capacity of the queue
-- ARGV[2]   the claim-set member
-- ARGV[3]   the message
-- ARGV[4]   the counter field for a published digest message
-- ARGV[5]   how long the marks are kept, s (longer than any claim is held before another flusher takes it)
-- Returns   1 published; 0 the queue is full; -1 already published by another flusher
--! include depth
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  return -1
end
if depth(KEYS, 3) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('RPUSH', KEYS[3], ARGV[3])
redis.call('HSET', KEYS[1], ARGV[2], 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('HINCRBY', KEYS[2], ARGV[4], 1)
return 1
