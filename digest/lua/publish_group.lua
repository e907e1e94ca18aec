-- Publish one step of a flush (digest/grouping.py): a user's digest messages, one per channel, or a fold's own
-- message; and release every claimed fold they cover, together or not at all: the step's keys are either all still
-- claimed or all published, so no flush (a takeover included) sends them twice, and none of them is lost.
-- The messages go to the end workers take from (RPUSH): their events are older than anything queued behind them.
-- KEYS[1]   the flush's claim set
-- KEYS[2]   the counters hash
-- KEYS[3]   the fold store's size: k (keys), b (payload bytes); the published folds leave it
-- KEYS[4]   the target queue's list
-- KEYS[5..] the queue's priority sub-lists, counted in the depth
-- ARGV[1]   the name prefix of this flush's claimed fold hashes (the member follows it)
-- ARGV[2]   capacity of the queue
-- ARGV[3]   n, how many members the group covers; ARGV[4 .. 3+n] the members
-- then      the counter fields for published messages, for digest messages and for their events; the events
--           the group carries; then the messages
-- Returns   1 published; 0 the queue is full (the claims stay); -1 already published by another flusher
--! include depth
--! include fold_fields
--! include claimed
local n = tonumber(ARGV[3])
local at = 4 + n
local published_field, messages_field, events_field, events = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
local held = {}
for i = 4, 3 + n do
  local fold = ARGV[1] .. ARGV[i]
  if redis.call('EXISTS', fold) == 1 then
    table.insert(held, fold)
  end
end
if #held == 0 then
  for i = 4, 3 + n do
    redis.call('SREM', KEYS[1], ARGV[i])
  end
  return -1
end
-- Room for every message of the step; an empty queue takes any step, so one larger than the queue still goes out.
local d = depth(KEYS, 4)
if d > 0 and d + (#ARGV - at - 3) > tonumber(ARGV[2]) then
  return 0
end
local messages = 0
for i = at + 4, #ARGV do
  redis.call('RPUSH', KEYS[4], ARGV[i])
  messages = messages + 1
end
for _, fold in ipairs(held) do
  forget_fold(fold, KEYS[3])
end
for i = 4, 3 + n do
  redis.call('SREM', KEYS[1], ARGV[i])
end
redis.call('HINCRBY', KEYS[2], published_field, messages)
redis.call('HINCRBY', KEYS[2], messages_field, messages)
redis.call('HINCRBY', KEYS[2], events_field, tonumber(events))
return 1
