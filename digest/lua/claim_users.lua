-- Claim the due fold keys of whole users for one flush, so that each user's keys go out together: one digest per
-- user and channel (digest/grouping.py). Each fold hash is renamed under the flush id, so a fold that arrives afterwards
-- starts a fresh hash and lands in the next digest.
-- The due keys are first staged, once the staged set is empty, into a set ordered by name: a user's members share
-- the prefix '[<user>,' of their JSON, so one range finds every staged key of a user. A staged set drains before
-- the next is staged, so no user waits behind users staged later. A staged key whose fold is held for later again
-- (a new event under quiet hours or a cadence) is left pending.
-- Each class takes keys only up to its own room (its queue's free slots, ARGV[9]): a user's keys of one class are
-- claimed whole, and only while they fit that class's room, except the class's first user of this claim, who may
-- pass it (else a user with more keys than the queue could ever hold would wait for ever). Keys of a class with no
-- room left stay staged for a later claim, and the walk goes on to the next user for the other classes. A key's
-- class is its kind's (the fold's latest kind, its FOLD.kind field, else the member's), or the store's first class for a
-- kind it does not know: digest/grouping.py class_of, which publishes it.
-- A fold's key is the prefix it is handed and its member, because the members are only known inside the script;
-- Sluice runs each Redis on a single instance (kombu's broker needs one anyway), never on Redis Cluster.
-- KEYS[1]  pending zset: member -> when it is due
-- KEYS[2]  the staged set (every score 0)
-- KEYS[3]  claims zset: flush id -> lease expiry
-- KEYS[4]  this flush's claim set (members it holds)
-- ARGV[1]  a pending fold's key, less its member (keys.fold(""))
-- ARGV[2]  flush id
-- ARGV[3]  lease expiry (seconds since the epoch): after it another flusher may take the claim over
-- ARGV[4]  the most users to claim
-- ARGV[5]  the most keys to claim (a user's keys are claimed whole: the first user may pass it)
-- ARGV[6]  the most keys to stage at once
-- ARGV[7]  a fold's key while this flush holds it, less its member (keys.claimed(flush id, ""))
-- ARGV[8]  the most users to look at (a walk past users whose classes have no room stays bounded)
-- ARGV[9]  the rooms (digest/user_claims.py owns the format): JSON {"rooms": [[class, keys it may take], ...] in
--          the store's order (the first is the class of an unknown kind), "kinds": {kind: class}}
-- Returns  {the claimed members, 1 when due keys were left staged (a class without room, or the walk cut short)}
--! include fold_fields
-- FOLD, SIZE: the fold hash's and the size hash's field names (pipeline/lua/include/fold_fields.lua)
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local max_users, max_keys, max_looked = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[8])
local wire = cjson.decode(ARGV[9])
if redis.call('ZCARD', KEYS[2]) == 0 then
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))) do
    redis.call('ZADD', KEYS[2], 0, member)
  end
end

local order, room, taken, closed = {}, {}, {}, {}
for i, pair in ipairs(wire.rooms) do
  order[i] = pair[1]
  room[pair[1]], taken[pair[1]] = tonumber(pair[2]), 0
end
local default = order[1]

-- Whether some class may still take keys in this claim.
local function open()
  for _, klass in ipairs(order) do
    if not closed[klass] and taken[klass] < room[klass] then
      return true
    end
  end
  return false
end

-- '[<user>,' of a member '[<user>,<kind>,<entity>]': the user is a JSON string (escapes skipped) or a number.
local function user_prefix(member)
  if string.sub(member, 2, 2) == '"' then
    local i = 3
    while i <= #member do
      local c = string.sub(member, i, i)
      if c == '\\' then
        i = i + 2
      elseif c == '"' then
        return string.sub(member, 1, i) .. ','
      else
        i = i + 1
      end
    end
    return member
  end
  return string.sub(member, 1, (string.find(member, ',', 1, true) or #member))
end

local function class_of(member)
  local kind = redis.call('HGET', ARGV[1] .. member, FOLD.kind)
  if not kind then
    local ok, parts = pcall(cjson.decode, member)
    kind = ok and type(parts) == 'table' and parts[2] or nil
  end
  return (type(kind) == 'string' and wire.kinds[kind]) or default
end

local claimed, users, looked, left = {}, 0, 0, 0
local from = '-'
while users < max_users and #claimed < max_keys and open() do
  if looked >= max_looked then
    left = 1
    break
  end
  local first = redis.call('ZRANGE', KEYS[2], from, '+', 'BYLEX', 'LIMIT', 0, 1)[1]
  if not first then
    break
  end
  looked = looked + 1
  local prefix = user_prefix(first)
  -- ZRANGE BYLEX (Redis 6.2) rather than ZRANGEBYLEX: Sluice's ACL user already has ZRANGE.
  local mine = redis.call('ZRANGE', KEYS[2], '[' .. prefix, '(' .. prefix .. '\255', 'BYLEX')
  from = '(' .. prefix .. '\255'
  local by_class = {}
  for _, member in ipairs(mine) do
    local klass = class_of(member)
    by_class[klass] = by_class[klass] or {}
    table.insert(by_class[klass], member)
  end
  local before = #claimed
  for _, klass in ipairs(order) do
    local theirs = by_class[klass]
    if theirs then
      local fits = taken[klass] == 0 or taken[klass] + #theirs <= room[klass]
      if closed[klass] or taken[klass] >= room[klass] or not fits then
        -- No room for this user's keys of the class: they wait staged, and so do the class's later users (a
        -- user never overtakes one whose keys did not fit).
        closed[klass] = closed[klass] or not fits
        left = 1
      elseif #claimed > 0 and #claimed + #theirs > max_keys then
        left = 1
        max_users = 0 -- the batch is full: this user's keys wait for the next claim
      else
        for _, member in ipairs(theirs) do
          redis.call('ZREM', KEYS[2], member)
          local due = tonumber(redis.call('ZSCORE', KEYS[1], member))
          local fold = ARGV[1] .. member
          if due and due <= now then
            if redis.call('EXISTS', fold) == 1 then
              redis.call('RENAME', fold, ARGV[7] .. member)
              redis.call('SADD', KEYS[4], member)
              table.insert(claimed, member)
              taken[klass] = taken[klass] + 1
            end
            redis.call('ZREM', KEYS[1], member)
          end
        end
      end
    end
  end
  -- A user all of whose staged keys were held again, claimed since, or left for want of room, takes no place in
  -- the batch.
  if #claimed > before then
    users = users + 1
  end
end
if #claimed > 0 then
  redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
end
return {claimed, left}
