-- Reserve seconds of a class's send rate for scheduled sends (pipeline/admission/schedule.py), and release the
-- seconds of those they replace, in one atomic step: a move releases its old second and takes a new one, never
-- both, never neither. A batch takes what fits: its first sends get a second each, the rest none (and keep theirs).
-- KEYS[1]  the class's reservations (hash: second -> count)
-- KEYS[2]  the seconds that hold reservations (zset: second -> second)
-- ARGV[1]  the most sends one second may hold (the class's slots per second)
-- ARGV[2]  the latest second a send may take (its send_at)
-- ARGV[3]  the earliest (its send_at less its kind's window)
-- ARGV[4]  how many sends to reserve for (a batch shares one send_at and window)
-- ARGV[5]  how many seconds after the window to look at for the next with room, when the window is full
-- ARGV[6..] the second each of those sends holds now and gives up once it has a new one ("" for a new send); with
--          none to reserve for (ARGV[4] is 0), the seconds to give up (cancelled sends)
-- Returns  {next, s1, s2, ...}: the seconds reserved, for the batch's first sends in order, latest first; next is the
--          earliest second at or after the window's start with room for one more send (-1 when none within the
--          look-ahead), or 0 when every send got a second
local slots, latest, earliest = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local wanted, ahead = tonumber(ARGV[4]), tonumber(ARGV[5])
local held_now = {}
for i = 1, wanted do
  held_now[i] = ARGV[5 + i] or ''
end

local function held(second)
  return tonumber(redis.call('HGET', KEYS[1], second)) or 0
end

local function add(second, delta)
  local count = redis.call('HINCRBY', KEYS[1], second, delta)
  if count <= 0 then
    redis.call('HDEL', KEYS[1], second)
    redis.call('ZREM', KEYS[2], second)
  else
    redis.call('ZADD', KEYS[2], second, second)
  end
end

-- Seconds for up to `count` sends, latest first, counting `freed` (second -> sends giving it up) as room.
local function fit(count, freed)
  local taken, second = {}, latest
  while #taken < count and second >= earliest do
    local key = tostring(second)
    local room = slots - held(key) + (freed[key] or 0)
    while room > 0 and #taken < count do
      table.insert(taken, second)
      room = room - 1
    end
    second = second - 1
  end
  return taken
end

if wanted == 0 then
  for i = 6, #ARGV do
    if ARGV[i] ~= '' then
      add(ARGV[i], -1)
    end
  end
  return {0}
end

-- The whole batch, its own releases counted as room (a move within its window may keep its second); else as many as
-- fit without them, so that no second is promised twice.
local freed = {}
for i = 1, wanted do
  if held_now[i] ~= '' then
    freed[held_now[i]] = (freed[held_now[i]] or 0) + 1
  end
end
local taken = fit(wanted, freed)
if #taken < wanted then
  taken = fit(wanted, {})
end
for i, second in ipairs(taken) do
  if held_now[i] ~= '' then
    add(held_now[i], -1)
  end
  add(tostring(second), 1)
end

local reply = {0}
if #taken < wanted then
  reply[1] = -1
  for s = earliest, latest + ahead do
    if held(tostring(s)) < slots then
      reply[1] = s
      break
    end
  end
end
for _, s in ipairs(taken) do
  table.insert(reply, s)
end
return reply
