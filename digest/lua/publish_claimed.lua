-- Publish one claimed fold's digest message and release the claim, together or not at all:
-- a key is either still claimed or published, never both, so no flush can send it twice.
-- The message goes to the end workers take from (RPUSH): its events are older than anything queued
-- behind it, so it is sent next rather than behind a backlog of newer singles.
-- KEYS[1]   the claimed fold hash
-- KEYS[2]   the flush's claim set
-- KEYS[3]   the counters hash
-- KEYS[4]   the fold store's size: k (keys), b (payload bytes); the published fold leaves it
-- KEYS[5]   the target queue's list
-- KEYS[6..] the queue's priority sub-lists, counted in the depth
-- ARGV[1]   capacity of the queue
-- ARGV[2]   the claim-set member
-- ARGV[3]   the message
-- ARGV[4]   the counter field for a published digest message
-- Returns   1 published; 0 the queue is full (the claim stays); -1 already published by another flusher
--! include depth
--! include claimed
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[2])
  return -1
end
if depth(KEYS, 5) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('RPUSH', KEYS[5], ARGV[3])
forget_fold(KEYS[1], KEYS[4])
redis.call('SREM', KEYS[2], ARGV[2])
redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
return 1
