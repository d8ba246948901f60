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
-- Every argument is passed on to Redis as it came: converting it to a Lua number and back costs Redis
-- more than the commands (docs/benchmarks.md, "Admission script cost in Redis").
local call, K, A = redis.call, KEYS, ARGV
local mode = A[2]
if mode == '1' or mode == '2' then
  local held = call('GET', K[1]) == 'h'
  call('SETEX', K[1], A[3], 'x')
  if not held then return 0 end
end
local ns = #K - 1
if mode == '2' then ns = ns / 2 end
for i = 2, ns + 1 do
  local due = true
  if mode == '2' then due = call('ZREM', K[i + ns], A[4]) == 1 end
  if due and call('EXISTS', K[i]) == 1 then
    if call('DECRBY', K[i], A[1]) <= 0 then call('DEL', K[i]) end
  end
end
return 1
