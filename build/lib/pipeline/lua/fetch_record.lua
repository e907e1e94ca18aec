-- Record a fetched message as delivered and not yet acked, in kombu's own format, and take it out of the
-- consumer's processing list: together, so a message is always in one of the two.
-- KEYS[1]  the consumer's processing list the message was moved into
-- KEYS[2]  kombu's unacked hash: delivery tag -> [message, exchange, routing key]
-- KEYS[3]  kombu's unacked index: delivery tag -> delivered at (seconds)
-- KEYS[4]  the consumer's delivery tags (so a reaper restores them as soon as the consumer is dead)
-- ARGV[1]  the message as it was fetched (matched exactly; "" when it came another way)
-- ARGV[2]  delivery tag
-- ARGV[3]  the unacked entry, JSON
-- ARGV[4]  now, seconds
-- Returns  how many copies left the processing list: 0 when a reaper had already put it back
local moved = 0
if ARGV[1] ~= '' then
  moved = redis.call('LREM', KEYS[1], -1, ARGV[1])
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[2])
return moved
