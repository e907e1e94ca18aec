-- A consumer says it is alive, and which lists it fetches from, on Redis's clock (every host shares it).
-- KEYS[1]  the consumers zset: consumer id -> when it counts as dead (ms)
-- KEYS[2]  the consumer's source lists (set)
-- ARGV[1]  consumer id
-- ARGV[2]  ms without a heartbeat after which the consumer counts as dead
-- ARGV[3..] its source lists
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
for i = 3, #ARGV do
  redis.call('SADD', KEYS[2], ARGV[i])
end
return now
