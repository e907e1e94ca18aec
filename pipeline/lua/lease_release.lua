-- Release a lease (pipeline/housekeeping.py) only if it is still the caller's: a step that outlived its lease must
-- not delete the lease of the step that took over.
-- KEYS[1]  the lease
-- ARGV[1]  the caller's token
-- Returns  1 released, 0 not the caller's (expired, or held by another)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
