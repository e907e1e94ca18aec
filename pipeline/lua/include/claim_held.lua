-- Whether the send of one notification on one channel is already held or done, shared by claim_send.lua and
-- claim_gate.lua: claim is the send claim's key (pipeline.redis.keys.sent), marks the "sent" mark hashes that may
-- hold its mark (pipeline.broker.marks.candidates), field the mark's field (pipeline.broker.marks.field).
-- Returns nil when the send is free to claim, else {state, ms it has left}: state is "sending" (another worker
-- holds the claim, or died holding it) or "sent".
local function claim_held(claim, marks, field)
  for _, mark in ipairs(marks) do
    if redis.call('HEXISTS', mark, field) == 1 then
      return {'sent', redis.call('PTTL', mark)}
    end
  end
  local state = redis.call('GET', claim)
  if state then
    return {state, redis.call('PTTL', claim)}
  end
  return nil
end
