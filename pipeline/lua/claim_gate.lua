-- Claim the send of one notification on one channel and pass the channel's gate, in one round trip: the send's
-- common case when the class's Redis (its claims and marks) is also the gates' Redis (pipeline.connections.shared_redis).
-- The claim is looked at first: a send another worker holds, or that already went out, takes no room at the
-- gate. The claim is taken only with the gate's grant: a send told to wait holds no claim while it waits.
-- KEYS[1]          the send claim (pipeline.redis.keys.sent)
-- KEYS[2..1+n]     the gate's keys, n = ARGV[1] (3, or 6 on a partitioned channel), as gate_acquire.lua's KEYS
-- KEYS[2+n..]      the "sent" mark hashes that may hold its mark (pipeline.broker.marks.candidates)
-- ARGV[1]          n, how many of KEYS are the gate's
-- ARGV[2]          claim TTL in seconds
-- ARGV[3]          the mark's field (pipeline.broker.marks.field)
-- ARGV[4..]        the gate's arguments, as gate_acquire.lua's ARGV
-- Returns          {"claimed", 0}: granted and claimed (the caller holds the gate's slots and the claim);
--                  {"wait", ms}: no room yet, nothing taken, ask again after ms;
--                  {"sending" or "sent", ms the claim or mark has left}: held or done elsewhere, nothing taken.
--! include claim_held
--! include gate_grant
local n = tonumber(ARGV[1])
local held = claim_held(KEYS[1], {unpack(KEYS, 2 + n)}, ARGV[3])
if held then
  return held
end
local wait_ms = gate_grant({unpack(KEYS, 2, 1 + n)}, {unpack(ARGV, 4)})
if wait_ms > 0 then
  return {'wait', wait_ms}
end
redis.call('SET', KEYS[1], 'sending', 'EX', tonumber(ARGV[2]))
return {'claimed', 0}
