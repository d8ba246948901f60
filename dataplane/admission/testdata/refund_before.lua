-- Refund or release one hold: subtract ARGV[1] micros from every pending counter it reserved on that
-- still exists (an expired counter is not recreated negative), deleting counters that reach zero or below.
-- KEYS[1] is the hold's marker (qh:{request id}) when ARGV[2] is 1 or 2: the hold is then removed only
-- while the marker says it is held ('h'), so refunding a hold twice — or a hold that was never made —
-- changes nothing, and the marker is left as a tombstone ('x', for ARGV[3] seconds) so that a late copy
-- of the admission call reserves nothing. Without a marker (ARGV[2] 0) the refund is unconditional.
-- KEYS[2..] are the qp: counters; with ARGV[2] = 2 (a hold with expiring members, admit.lua) they are
-- followed by the matching qe: sets and a counter is decremented only if ARGV[4] (the hold's member) was
-- still in its set: a hold admission already expired is not subtracted again.
-- Reply: 1 if the hold was removed, 0 if there was nothing to remove.
local m = tonumber(ARGV[1])
local mode = ARGV[2]
if mode == '1' or mode == '2' then
  local held = redis.call('GET', KEYS[1]) == 'h'
  redis.call('SET', KEYS[1], 'x', 'EX', tonumber(ARGV[3]))
  if not held then return 0 end
end
local ns = #KEYS - 1
if mode == '2' then ns = ns / 2 end
for i = 2, ns + 1 do
  local due = true
  if mode == '2' then due = redis.call('ZREM', KEYS[i + ns], ARGV[4]) == 1 end
  if due and redis.call('EXISTS', KEYS[i]) == 1 then
    local v = redis.call('DECRBY', KEYS[i], m)
    if v <= 0 then redis.call('DEL', KEYS[i]) end
  end
end
return 1
