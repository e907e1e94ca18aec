-- Take a claimed (or merged) fold hash out of the fold store: its key and its payload bytes leave the store's
-- size. One definition for every script that ends a claimed fold (it names them by FOLD and SIZE: a script includes
-- pipeline/lua/include/fold_fields.lua before this one).
local function forget_fold(fold, size)
  redis.call('HINCRBY', size, SIZE.bytes, -(tonumber(redis.call('HGET', fold, FOLD.bytes)) or 0))
  redis.call('HINCRBY', size, SIZE.keys, -1)
  redis.call('DEL', fold)
end
