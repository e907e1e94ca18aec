-- Record the end of one send: its state for redeliveries, and its metrics, in one round trip.
-- KEYS[1]  the send-state key (pipeline.keys.sent)
-- KEYS[2]  the counters hash
-- ARGV[1]  new state: "sent" (done, kept ARGV[2] s), or "" to drop the claim so a retry may send
-- ARGV[2]  state TTL, seconds
-- ARGV[3]  counter field of sluice_sent_total
-- ARGV[4]  histogram bucket field of sluice_send_duration_seconds ("" to skip the histogram)
-- ARGV[5]  histogram sum field
-- ARGV[6]  histogram count field
-- ARGV[7]  the send's duration, seconds
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
end
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
if ARGV[4] ~= '' then
  redis.call('HINCRBY', KEYS[2], ARGV[4], 1)
  redis.call('HINCRBYFLOAT', KEYS[2], ARGV[5], ARGV[7])
  redis.call('HINCRBY', KEYS[2], ARGV[6], 1)
end
return 1
