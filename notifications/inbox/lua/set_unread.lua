-- Write a user's unread count counted at generation ARGV[1], unless a later generation's count is there already.
-- A writer takes its generation (HINCRBY g) after its change committed, then counts: the highest generation
-- written counted every change committed before it was taken, so a slow writer never overwrites a newer count.
-- KEYS[1]  the user's unread hash (pipeline.redis.keys.inbox_unread): n count, w generation written, g latest taken
-- ARGV[1]  the generation this count was taken at
-- ARGV[2]  the count
-- ARGV[3]  expiry of the hash, seconds (an idle user's count goes; the next poll counts it again)
-- Returns  1 when written, 0 when a later count was there
local written = tonumber(redis.call('HGET', KEYS[1], 'w') or '-1')
if tonumber(ARGV[1]) <= written then
  return 0
end
redis.call('HSET', KEYS[1], 'n', ARGV[2], 'w', ARGV[1])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
