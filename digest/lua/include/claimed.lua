-- Take a claimed (or merged) fold hash out of the fold store: its key and its payload bytes leave the store's
-- size. One definition for every script that ends a claimed fold.
local function forget_fold(fold, size)
  redis.call('HINCRBY', size, 'b', -(tonumber(redis.call('HGET', fold, 'z')) or 0))
  redis.call('HINCRBY', size, 'k', -1)
  redis.call('DEL', fold)
end
