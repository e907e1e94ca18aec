-- Publish one step's messages (publish_group.lua's) on their class's Redis when the fold store is another Redis
-- (SLUICE_DIGEST["redis_url"]), marking the step handed over in the same step. Its claims are dropped on the store's
-- Redis afterwards (drop_group.lua); a flusher that dies in between leaves the claims, and whoever takes them over
-- finds the mark here and only drops them: each step is published once.
-- KEYS[1]   the flush's handover marks (hash: group -> 1)
-- KEYS[2]   the counters hash
-- KEYS[3]   the target queue's list
-- KEYS[4..] the queue's priority sub-lists, counted in the depth
-- ARGV[1]   capacity of the queue
-- ARGV[2]   the step's mark (a user's digests: the user and class; a fold's own message: its member)
-- ARGV[3]   how long the marks are kept, s (longer than any claim is held before another flusher takes it)
-- ARGV[4]   the counter field for published messages; ARGV[5] for digest messages; ARGV[6] for their events
-- ARGV[7]   the events the group carries
-- ARGV[8]   n, how many members the group covers; ARGV[9 .. 8+n] the members (a mark of one of them, left by a
--           flusher that published one message per key, counts as the group's)
-- then      the messages
-- Returns   1 published; 0 the queue is full; -1 already published by another flusher
--! include depth
local n = tonumber(ARGV[8])
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
  return -1
end
for i = 9, 8 + n do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    return -1
  end
end
-- Room for every message of the step; an empty queue takes any step, so one larger than the queue still goes out.
local d = depth(KEYS, 3)
if d > 0 and d + (#ARGV - 8 - n) > tonumber(ARGV[1]) then
  return 0
end
local messages = 0
for i = 9 + n, #ARGV do
  redis.call('RPUSH', KEYS[3], ARGV[i])
  messages = messages + 1
end
redis.call('HSET', KEYS[1], ARGV[2], 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
redis.call('HINCRBY', KEYS[2], ARGV[4], messages)
redis.call('HINCRBY', KEYS[2], ARGV[5], messages)
redis.call('HINCRBY', KEYS[2], ARGV[6], tonumber(ARGV[7]))
return 1
