-- Refund one hold: subtract ARGV[1] micros from every pending counter in KEYS that still exists
-- (an expired counter is not recreated negative), deleting counters that reach zero or below.
local m = tonumber(ARGV[1])
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local v = redis.call('DECRBY', KEYS[i], m)
    if v <= 0 then redis.call('DEL', KEYS[i]) end
  end
end
return 1
