-- Admission: one round trip that checks a key's rate limits and every quota-bearing scope, then
-- reserves the estimate on all scopes and counts the request — or changes nothing.
--
-- KEYS[1] rpm window counter, KEYS[2] tpm window counter, KEYS[3] the request's hold marker
-- (qh:{request id}; used only when ARGV[7] is 1),
-- KEYS[3+2i-1] qp:{scope}:{id} (pending micros), KEYS[3+2i] qu:{scope}:{id} (cost_used mirror: '<micros>'
-- at adjustment epoch 0 or '<micros>:<epoch>')
-- ARGV[1] rpm limit (0 = none), ARGV[2] tpm limit (0 = none), ARGV[3] estimated tokens,
-- ARGV[4] estimate micros, ARGV[5] pending TTL seconds, ARGV[6] window TTL seconds,
-- ARGV[7] the hold marker's TTL in seconds, 0 for no marker (a marker needs a request id, an estimate
-- and scopes to reserve on),
-- ARGV[7+3i-2] limit micros of scope i, ARGV[7+3i-1] snapshot cost_used micros of scope i, ARGV[7+3i] the
-- snapshot's adjustment epoch of scope i
-- Reply {0,0} admitted; {1,0} rpm; {2,0} tpm; {3,i} scope i over quota; {4,0} this request's
-- reservation was released already (its caller gave up on an earlier copy of this call): nothing done.
--
-- The marker makes a request's hold exist once: it is set to 'h' with the reservation, a repeated copy
-- of the call (sent again after a lost reply) finds it and reserves nothing more, a refund or release
-- removes the hold only while it is 'h', and a release leaves 'x' so that a copy of the call arriving
-- after its caller gave up (a hung Redis answering late) reserves nothing.
-- Amounts are integers; Lua compares them as doubles, exact below 2^53 micro-dollars (~9e9 dollars).
local rpmLimit = tonumber(ARGV[1])
local tpmLimit = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local est = tonumber(ARGV[4])
local pendingTTL = tonumber(ARGV[5])
local windowTTL = tonumber(ARGV[6])
local markTTL = tonumber(ARGV[7])
local marked = markTTL > 0
local n = (#KEYS - 3) / 2

if marked then
  local m = redis.call('GET', KEYS[3])
  if m == 'h' then return {0, 0} end
  if m == 'x' then return {4, 0} end
end
if rpmLimit > 0 then
  local c = tonumber(redis.call('GET', KEYS[1]) or '0')
  if c + 1 > rpmLimit then return {1, 0} end
end
if tpmLimit > 0 and tokens > 0 then
  local c = tonumber(redis.call('GET', KEYS[2]) or '0')
  -- An empty window admits one request even when its estimate alone exceeds the limit, so an
  -- oversized request is not refused forever.
  if c > 0 and c + tokens > tpmLimit then return {2, 0} end
end
for i = 1, n do
  local limit = tonumber(ARGV[7 + 3 * i - 2])
  local snapUsed = tonumber(ARGV[7 + 3 * i - 1])
  local snapEpoch = tonumber(ARGV[7 + 3 * i])
  -- used: of the mirror and the snapshot, the value of the newer adjustment epoch, or the larger of the
  -- two at the same epoch (docs/settlement.md, "Adjustment epochs"). No mirror: the snapshot's.
  local used = snapUsed
  local s = redis.call('GET', KEYS[3 + 2 * i])
  if s then
    local mv, me = string.match(s, '^(%d+):(%d+)$')
    local m, e = tonumber(s) or 0, 0
    if mv then m, e = tonumber(mv), tonumber(me) end
    if e > snapEpoch or (e == snapEpoch and m > used) then used = m end
  end
  local pending = tonumber(redis.call('GET', KEYS[3 + 2 * i - 1]) or '0')
  if pending < 0 then pending = 0 end
  -- An exhausted scope (used plus what is held at or past its limit) refuses every request, a zero
  -- estimate included (an output-only price estimates to 0): otherwise it is served free past its limit.
  if used + pending + est > limit or used + pending >= limit then return {3, i} end
end
if est > 0 and n > 0 then
  for i = 1, n do
    local k = KEYS[3 + 2 * i - 1]
    redis.call('INCRBY', k, est)
    redis.call('EXPIRE', k, pendingTTL)
  end
  if marked then redis.call('SET', KEYS[3], 'h', 'EX', markTTL) end
end
if rpmLimit > 0 then
  redis.call('INCR', KEYS[1])
  redis.call('EXPIRE', KEYS[1], windowTTL)
end
if tpmLimit > 0 and tokens > 0 then
  redis.call('INCRBY', KEYS[2], tokens)
  redis.call('EXPIRE', KEYS[2], windowTTL)
end
return {0, 0}
