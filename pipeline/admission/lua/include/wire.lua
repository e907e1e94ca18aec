-- The Lua side of admission's wire formats (the Python side, and the formats themselves, are
-- pipeline/admission/wire.py). Defines, taking everything they read as parameters:
--   read_request(keys, argv)        -> c (the kind's constants), k (KEYS by name), a (ARGV by name), and the
--                                      index of the first KEYS entry after the named ones
--   encode_reply(fields)            -> the reply: a JSON object (outcome, flush, instant, reason, grain, and
--                                      message or handover when there is one)
--   split(text)                     -> the items of a ","-separated list
--   decode_plan(text)               -> instant channels, digest channels, strict (a boolean); nil for a bad plan
--   encode_plan(instant, digest, strict)
local function read_request(keys, argv)
  local layout = cjson.decode(argv[1])
  local k, a = {}, {}
  for i, name in ipairs(layout.keys) do
    k[name] = keys[i]
  end
  for i, name in ipairs(layout.args) do
    a[name] = argv[i]
  end
  return cjson.decode(a.constants), k, a, #layout.keys + 1
end

local function encode_reply(fields)
  return cjson.encode(fields)
end

local function split(text)
  local out = {}
  for item in string.gmatch(text or '', '[^,]+') do
    table.insert(out, item)
  end
  return out
end

local function decode_plan(text)
  local instant, digest, strict = string.match(text, '^([^|]*)|([^|]*)|([01])$')
  if not strict then
    return nil
  end
  return split(instant), split(digest), strict == '1'
end

local function encode_plan(instant, digest, strict)
  return table.concat(instant, ',') .. '|' .. table.concat(digest, ',') .. '|' .. (strict and '1' or '0')
end
