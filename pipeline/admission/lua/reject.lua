-- Count a rejection, and tell the caller whether it opens a burst (and so should be logged).
-- KEYS[1]  the counters hash
-- KEYS[2]  the burst flag of the class
-- ARGV[1]  the counter field
-- ARGV[2]  burst window, seconds: rejections closer together than this are one burst
-- Returns  1 when this rejection opens a burst, else 0
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local opened = redis.call('SET', KEYS[2], '1', 'NX', 'EX', tonumber(ARGV[2]))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[2]))
if opened then
  return 1
end
return 0
