-- Claim the due fold keys of whole users for one flush, so that each user's keys go out together: one digest per
-- user and channel (digest/grouping.py). Each fold hash is renamed under the flush id, as claim.lua does, so a fold
-- that arrives afterwards starts a fresh hash and lands in the next digest.
-- The due keys are first staged, once the staged set is empty, into a set ordered by name: a user's members share
-- the prefix '[<user>,' of their JSON, so one range finds every staged key of a user. A staged set drains before
-- the next is staged, so no user waits behind users staged later. A staged key whose fold is held for later again
-- (a new event under quiet hours or a cadence) is left pending, as claim.lua leaves it.
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
-- Returns  the claimed members
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local max_users, max_keys = tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('ZCARD', KEYS[2]) == 0 then
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))) do
    redis.call('ZADD', KEYS[2], 0, member)
  end
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

local claimed, users = {}, 0
while users < max_users and #claimed < max_keys do
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not first then
    break
  end
  local prefix = user_prefix(first)
  -- ZRANGE BYLEX (Redis 6.2) rather than ZRANGEBYLEX: Sluice's ACL user already has ZRANGE.
  local mine = redis.call('ZRANGE', KEYS[2], '[' .. prefix, '(' .. prefix .. '\255', 'BYLEX')
  if #claimed > 0 and #claimed + #mine > max_keys then
    break
  end
  local before = #claimed
  for _, member in ipairs(mine) do
    redis.call('ZREM', KEYS[2], member)
    local due = tonumber(redis.call('ZSCORE', KEYS[1], member))
    local fold = ARGV[1] .. member
    if due and due <= now then
      if redis.call('EXISTS', fold) == 1 then
        redis.call('RENAME', fold, ARGV[7] .. member)
        redis.call('SADD', KEYS[4], member)
        table.insert(claimed, member)
      end
      redis.call('ZREM', KEYS[1], member)
    end
  end
  -- A user all of whose staged keys were held again, or claimed since, takes no place in the batch.
  if #claimed > before then
    users = users + 1
  end
end
if #claimed > 0 then
  redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
end
return claimed
