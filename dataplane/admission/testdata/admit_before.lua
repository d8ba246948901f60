-- Admission: one round trip that checks the rate limits (the API key's and its scopes') and every
-- quota-bearing scope, then reserves the estimate on all scopes and counts the request — or changes
-- nothing but the removal of expired holds.
--
-- KEYS[1] the request's hold marker (qh:{request id}; used only when ARGV[6] > 0);
-- then per rate limiter j = 1..nl: KEYS[1+2j-1] its requests window, KEYS[1+2j] its tokens window;
-- then per scope i = 1..n: KEYS[b+3i-2] qp:{scope}:{id}[:{period}] (pending micros),
-- KEYS[b+3i-1] qu:{scope}:{id}[:{period}] (cost_used mirror: '<micros>' at adjustment epoch 0 or
-- '<micros>:<epoch>'), KEYS[b+3i] qe:{scope}:{id}[:{period}] (the holds of qp: as a sorted set, member
-- '<micros>:<request id>', score its expiry in unix ms), with b = 1 + 2nl.
-- ARGV[1] nl, ARGV[2] estimated tokens, ARGV[3] estimate micros, ARGV[4] pending TTL seconds,
-- ARGV[5] window TTL seconds, ARGV[6] the hold marker's TTL in seconds, 0 for no marker (a marker needs
-- a request id, an estimate and scopes to reserve on), ARGV[7] now in unix ms, ARGV[8] the hold's member
-- ('' without a marker), then per limiter its rpm and tpm limits (0 = none), then per scope its limit
-- micros, snapshot cost_used micros (of the period) and snapshot adjustment epoch.
-- Reply {0,0} admitted; {1,j} limiter j's rpm; {2,j} limiter j's tpm; {3,i} scope i over quota; {4,0}
-- this request's reservation was released already (its caller gave up on an earlier copy of this call):
-- nothing done.
--
-- The marker makes a request's hold exist once: it is set to 'h' with the reservation, a repeated copy
-- of the call (sent again after a lost reply) finds it and reserves nothing more, a refund or release
-- removes the hold only while it is 'h', and a release leaves 'x' so that a copy of the call arriving
-- after its caller gave up (a hung Redis answering late) reserves nothing.
-- Each marked hold is also a member of its scopes' qe: set, scored by its own expiry (now + pending
-- TTL): every call first removes the expired members of its scopes and subtracts them from qp:, so a hold
-- leaked by a dead data plane stops counting after the TTL even while the scope keeps getting traffic
-- (each reservation refreshes the keys' TTL, not the holds'). A refund subtracts a hold only if it removed
-- its member, so a hold is never subtracted twice.
-- Amounts are integers; Lua compares them as doubles, exact below 2^53 micro-dollars (~9e9 dollars).
local nl = tonumber(ARGV[1])
local tokens = tonumber(ARGV[2])
local est = tonumber(ARGV[3])
local pendingTTL = tonumber(ARGV[4])
local windowTTL = tonumber(ARGV[5])
local markTTL = tonumber(ARGV[6])
local now = tonumber(ARGV[7])
local member = ARGV[8]
local marked = markTTL > 0
local b = 1 + 2 * nl
local n = (#KEYS - b) / 3
local la = 8 -- ARGV of limiter j: la + 2j - 1 (rpm), la + 2j (tpm)
local sa = 8 + 2 * nl -- ARGV of scope i: sa + 3i - 2 .. sa + 3i

if marked then
  local m = redis.call('GET', KEYS[1])
  if m == 'h' then return {0, 0} end
  if m == 'x' then return {4, 0} end
end
-- Expired holds stop counting (at most 100 per scope per call; a backlog drains over later calls).
for i = 1, n do
  local qp, qe = KEYS[b + 3 * i - 2], KEYS[b + 3 * i]
  local gone = redis.call('ZRANGEBYSCORE', qe, '-inf', now, 'LIMIT', 0, 100)
  for _, m in ipairs(gone) do
    redis.call('ZREM', qe, m)
    local amt = tonumber(string.match(m, '^(%d+):')) or 0
    if amt > 0 and redis.call('EXISTS', qp) == 1 then
      if redis.call('DECRBY', qp, amt) <= 0 then redis.call('DEL', qp) end
    end
  end
end
for j = 1, nl do
  local rpm = tonumber(ARGV[la + 2 * j - 1])
  local tpm = tonumber(ARGV[la + 2 * j])
  if rpm > 0 then
    local c = tonumber(redis.call('GET', KEYS[1 + 2 * j - 1]) or '0')
    if c + 1 > rpm then return {1, j} end
  end
  if tpm > 0 and tokens > 0 then
    local c = tonumber(redis.call('GET', KEYS[1 + 2 * j]) or '0')
    -- An empty window admits one request even when its estimate alone exceeds the limit, so an
    -- oversized request is not refused forever.
    if c > 0 and c + tokens > tpm then return {2, j} end
  end
end
for i = 1, n do
  local limit = tonumber(ARGV[sa + 3 * i - 2])
  local snapUsed = tonumber(ARGV[sa + 3 * i - 1])
  local snapEpoch = tonumber(ARGV[sa + 3 * i])
  -- used: of the mirror and the snapshot, the value of the newer adjustment epoch, or the larger of the
  -- two at the same epoch (docs/settlement.md, "Adjustment epochs"). No mirror: the snapshot's.
  local used = snapUsed
  local s = redis.call('GET', KEYS[b + 3 * i - 1])
  if s then
    local mv, me = string.match(s, '^(%d+):(%d+)$')
    local m, e = tonumber(s) or 0, 0
    if mv then m, e = tonumber(mv), tonumber(me) end
    if e > snapEpoch or (e == snapEpoch and m > used) then used = m end
  end
  local pending = tonumber(redis.call('GET', KEYS[b + 3 * i - 2]) or '0')
  if pending < 0 then pending = 0 end
  -- An exhausted scope (used plus what is held at or past its limit) refuses every request, a zero
  -- estimate included (an output-only price estimates to 0): otherwise it is served free past its limit.
  if used + pending + est > limit or used + pending >= limit then return {3, i} end
end
if est > 0 and n > 0 then
  for i = 1, n do
    local qp, qe = KEYS[b + 3 * i - 2], KEYS[b + 3 * i]
    redis.call('INCRBY', qp, est)
    redis.call('EXPIRE', qp, pendingTTL)
    if member ~= '' then
      redis.call('ZADD', qe, now + pendingTTL * 1000, member)
      redis.call('EXPIRE', qe, pendingTTL)
    end
  end
  if marked then redis.call('SET', KEYS[1], 'h', 'EX', markTTL) end
end
for j = 1, nl do
  if tonumber(ARGV[la + 2 * j - 1]) > 0 then
    local k = KEYS[1 + 2 * j - 1]
    redis.call('INCR', k)
    redis.call('EXPIRE', k, windowTTL)
  end
  if tonumber(ARGV[la + 2 * j]) > 0 and tokens > 0 then
    local k = KEYS[1 + 2 * j]
    redis.call('INCRBY', k, tokens)
    redis.call('EXPIRE', k, windowTTL)
  end
end
return {0, 0}
