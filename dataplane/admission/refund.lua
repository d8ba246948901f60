-- Refund or release one hold: subtract ARGV[1] micros from every pending counter in KEYS[2..] that still
-- exists (an expired counter is not recreated negative), deleting counters that reach zero or below.
-- KEYS[1] is the hold's marker (qh:{request id}) when ARGV[2] is 1: the hold is then removed only while
-- the marker says it is held ('h'), so refunding a hold twice — or a hold that was never made — changes
-- nothing, and the marker is left as a tombstone ('x', for ARGV[3] seconds) so that a late copy of the
-- admission call reserves nothing. Without a marker (ARGV[2] 0) the refund is unconditional.
-- Reply: 1 if the hold was removed, 0 if there was nothing to remove.
local m = tonumber(ARGV[1])
if ARGV[2] == '1' then
  local held = redis.call('GET', KEYS[1]) == 'h'
  redis.call('SET', KEYS[1], 'x', 'EX', tonumber(ARGV[3]))
  if not held then return 0 end
end
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local v = redis.call('DECRBY', KEYS[i], m)
    if v <= 0 then redis.call('DEL', KEYS[i]) end
  end
end
return 1
