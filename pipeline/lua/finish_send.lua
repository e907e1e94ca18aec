-- Record the end of one send: its "sent" mark for redeliveries, and its metrics, in one round trip.
-- KEYS[1]  the send claim (pipeline.redis.keys.sent), dropped
-- KEYS[2]  the counters hash
-- KEYS[3]  the mark hash of this time bucket (pipeline.broker.marks.write_target)
-- ARGV[1]  "sent" to mark it done (a redelivery then does nothing), or "" so that a retry may send
-- ARGV[2]  when the mark hash expires, Unix seconds: it is expired whole, never field by field
-- ARGV[3]  counter field of sluice_sent_total
-- ARGV[4]  histogram bucket field of sluice_send_duration_seconds ("" to skip the histogram)
-- ARGV[5]  histogram sum field
-- ARGV[6]  histogram count field
-- ARGV[7]  the send's duration, seconds
-- ARGV[8]  the mark's field (pipeline.broker.marks.field)
-- ARGV[9]  one more counter field to add one to ("" for none): the message's processed count
-- ARGV[10] histogram bucket field of sluice_scheduled_lateness_seconds ("" when it was not a scheduled send)
-- ARGV[11] its sum field
-- ARGV[12] its count field
-- ARGV[13] the scheduled send's lateness: seconds between its send_at and its send (0 when early)
-- KEYS[4]  the activity log's capped stream (pipeline.redis.keys.activity)
-- ARGV[14] its bound, SLUICE_ACTIVITY["buffer_entries"] ("0": write no entry)
-- ARGV[15..] the entry's wire fields and values, in pairs (pipeline/activity_fields.py encode)
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[8], 1)
  redis.call('EXPIREAT', KEYS[3], tonumber(ARGV[2]))
end
redis.call('DEL', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
if ARGV[4] ~= '' then
  redis.call('HINCRBY', KEYS[2], ARGV[4], 1)
  redis.call('HINCRBYFLOAT', KEYS[2], ARGV[5], ARGV[7])
  redis.call('HINCRBY', KEYS[2], ARGV[6], 1)
end
if ARGV[9] and ARGV[9] ~= '' then
  redis.call('HINCRBY', KEYS[2], ARGV[9], 1)
end
if ARGV[10] and ARGV[10] ~= '' then
  redis.call('HINCRBY', KEYS[2], ARGV[10], 1)
  redis.call('HINCRBYFLOAT', KEYS[2], ARGV[11], ARGV[13])
  redis.call('HINCRBY', KEYS[2], ARGV[12], 1)
end
if ARGV[14] and ARGV[14] ~= '0' and #ARGV > 14 then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[14], '*', unpack(ARGV, 15))
end
return 1
