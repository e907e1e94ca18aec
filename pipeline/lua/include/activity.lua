-- The activity log's buffer: one entry per decision or send, XADDed in the step that makes it (a capped stream on
-- the class's Redis; pipeline/activity_fields.py owns the entry's fields, passed in by name). Defines:
--   activity_add(log, key, values) -> nothing; log is the constants' activity ({maxlen, f = wire names}, or false
--     when SLUICE_ACTIVITY is off), key the stream, values a table {field name = text}; empty values are left out.
--     MAXLEN ~ keeps the stream near its bound: past it the oldest entries, drained or not, are trimmed.
local function activity_add(log, key, values)
  if not log then
    return
  end
  local args = {key, 'MAXLEN', '~', log.maxlen, '*'}
  for name, value in pairs(values) do
    if value ~= '' and value ~= nil then
      args[#args + 1] = log.f[name]
      args[#args + 1] = value
    end
  end
  redis.call('XADD', unpack(args))
end
