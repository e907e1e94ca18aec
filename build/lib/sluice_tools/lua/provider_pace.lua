-- A simulated provider's own rate limit: callers queue first come, first served, one per interval.
-- KEYS[1]  the provider's next free moment (ms, Redis clock)
-- ARGV[1]  interval between sends, ms
-- Returns  ms the caller waits before its send starts
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local free = tonumber(redis.call('GET', KEYS[1])) or now
local start = math.max(now, free)
redis.call('SET', KEYS[1], start + tonumber(ARGV[1]), 'PX', 60000)
return start - now
