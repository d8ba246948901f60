-- Admission: one round trip that checks the rate limits (the API key's and its scopes') and every
-- quota-bearing scope, then reserves the estimate on all scopes and counts the request — or changes
-- nothing but the removal of expired holds.
--
-- KEYS[1] the request's hold marker (qh:{request id}; used only when ARGV[6] is not empty);
-- then per rate limiter j = 1..nl: KEYS[1+2j-1] its requests window, KEYS[1+2j] its tokens window;
-- then per scope i = 1..n: KEYS[b+3i-2] qp:{scope}:{id}[:{period}] (pending micros),
-- KEYS[b+3i-1] qu:{scope}:{id}[:{period}] (cost_used mirror: '<micros>' at adjustment epoch 0 or
-- '<micros>:<epoch>'), KEYS[b+3i] qe:{scope}:{id}[:{period}] (the holds of qp: as a sorted set, member
-- '<micros>:<request id>', score its expiry in unix ms), with b = 1 + 2nl; last, KEYS[#KEYS] the request's
-- cost-lookup marker rc:{request id} (docs/cost.md, "Cost by request id").
-- ARGV[1] nl (one digit: at most the key and its org, team and user), ARGV[2] estimated tokens, ARGV[3]
-- estimate micros, ARGV[4] pending TTL seconds, ARGV[5] now in unix ms, ARGV[6] the hold's member, ''
-- for no marker (a marker needs a request id, an estimate and scopes to reserve on; the marker lives
-- 7 days, admission.go's markerTTL), ARGV[7] the hold's expiry in unix ms (now + pending TTL), then per
-- limiter its rpm and tpm limits ('0' = none), then per scope its limit micros, snapshot cost_used micros
-- (of the period) and snapshot adjustment epoch; last, ARGV[#ARGV] the API key id the cost-lookup marker
-- names ('' for no marker: the request has no valid id), set for 24 hours (admission.go's costMarkerTTL)
-- whatever the outcome, as every admitted or refused request has a settlement record.
-- Reply: 100 × outcome + index. 0 admitted; 100+j limiter j's rpm; 200+j limiter j's tpm; 300+i scope i
-- over quota; 400 this request's reservation was released already (its caller gave up on an earlier copy
-- of this call): nothing done.
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
-- A rate window gets its TTL (2 minutes, admission.go's rateWindowTTL) when this script creates it, with
-- the first count of its minute — only the admissions of that minute read it, so a TTL from the first
-- count serves them as one from the last did; the pending counters and hold sets get theirs with every
-- reservation.
-- Amounts are integers; Lua compares them as doubles, exact below 2^53 micro-dollars (~9e9 dollars).
--
-- Cost: this runs on every request, and Redis's CPU is shared by every data plane. What costs here is
-- not Lua's arithmetic but each redis.call (~6k instructions with its key lookup and reply), each KEYS and
-- ARGV element (~900), a table returned to Redis (~4k: the reply is a number) and each conversion between
-- a string and a number (~1k: tonumber is strtod; a Lua number passed to redis.call is printed with
-- '%.17g'). So arguments Redis only passes on (TTLs, times, amounts) stay strings, each number is
-- converted once, counters are counted first and their new values compared (a refusal undoes them)
-- instead of being read, and nothing is read that the decision does not need (docs/benchmarks.md,
-- "Admission script cost in Redis").
local call, K, A = redis.call, KEYS, ARGV
local nl = string.byte(A[1]) - 48 -- one digit
local tokens = tonumber(A[2])
local est = tonumber(A[3])
local member = A[6]
local marked = member ~= ''
local b = 1 + 2 * nl
local n = (#K - b - 1) / 3
local la = 7 -- ARGV of limiter j: la + 2j - 1 (rpm), la + 2j (tpm)
local sa = 7 + 2 * nl -- ARGV of scope i: sa + 3i - 2 .. sa + 3i

if A[#A] ~= '' then call('SET', K[#K], A[#A], 'EX', '86400') end
if marked then
  local m = call('GET', K[1])
  if m == 'h' then return 0 end
  if m == 'x' then return 400 end
end
-- Expired holds stop counting (at most 100 per scope per call; a backlog drains over later calls).
for i = 1, n do
  local qp, qe = K[b + 3 * i - 2], K[b + 3 * i]
  -- ZCOUNT answers a number, cheaper than an empty list when nothing expired (nearly every call).
  local gone = {}
  if call('ZCOUNT', qe, '-inf', A[5]) > 0 then gone = call('ZRANGEBYSCORE', qe, '-inf', A[5], 'LIMIT', '0', '100') end
  for x = 1, #gone do
    local m = gone[x]
    call('ZREM', qe, m)
    local amt = tonumber(string.match(m, '^(%d+):')) or 0
    if amt > 0 and call('EXISTS', qp) == 1 then
      if call('DECRBY', qp, amt) <= 0 then call('DEL', qp) end
    end
  end
end
-- Quotas first, scope by scope. used: of the mirror and the snapshot, the value of the newer adjustment
-- epoch, or the larger of the two at the same epoch (docs/settlement.md, "Adjustment epochs"); no
-- mirror: the snapshot's. pending: with an estimate to reserve, the scope's pending counter gets it at
-- once (INCRBY answers the pending amount with it, which spares reading and parsing it); otherwise it is
-- read. A scope whose used amount alone refuses the request (pending holds only add to it) refuses before
-- its counter is touched: a spent quota — the refusal a client meets over and over — costs reads only.
-- A refusal undoes every count this call made (below), so it changes nothing, as before: a counter this
-- call created has no TTL yet (TTLs are set once everything passed) and is deleted, any other one gets its
-- value back.
local reserve = est > 0 and n > 0
local refused, at
local si = 0 -- the scopes counted: 1..si
-- uncount takes amt back from counter k, deleting the counter when this call created it (back to 0 and
-- no TTL yet: TTLs are set once everything passed).
local function uncount(k, amt)
  if call('DECRBY', k, amt) == 0 and call('PTTL', k) == -1 then call('DEL', k) end
end
-- undoReservations takes the estimate back from the pending counters of the scopes counted so far.
local function undoReservations()
  for i = si, 1, -1 do uncount(K[b + 3 * i - 2], A[3]) end
end
for i = 1, n do
  local limit = tonumber(A[sa + 3 * i - 2])
  local used = tonumber(A[sa + 3 * i - 1])
  local s = call('GET', K[b + 3 * i - 1])
  if s then
    -- '<micros>' is epoch 0; '<micros>:<epoch>' is not a number; anything else counts as 0 at epoch 0.
    local m, e = tonumber(s), 0
    if not m then
      local mv, me = string.match(s, '^(%d+):(%d+)$')
      if mv then m, e = tonumber(mv), tonumber(me) else m = 0 end
    end
    local se = A[sa + 3 * i]
    local snapEpoch = 0
    if se ~= '0' then snapEpoch = tonumber(se) end
    if e > snapEpoch or (e == snapEpoch and m > used) then used = m end
  end
  -- An exhausted scope (used plus what is held at or past its limit) refuses every request, a zero
  -- estimate included (an output-only price estimates to 0): otherwise it is served free past its limit.
  if used + est > limit or used >= limit then refused, at = 3, i; break end
  local qp = K[b + 3 * i - 2]
  local pending
  if reserve then
    si = i
    pending = call('INCRBY', qp, A[3]) - est
    -- A scope named twice counts what its earlier copies added as not pending, as when every check came
    -- before every reservation.
    for i2 = 1, i - 1 do
      if K[b + 3 * i2 - 2] == qp then pending = pending - est end
    end
  else
    pending = call('GET', qp)
    if pending then pending = tonumber(pending) else pending = 0 end
  end
  if pending < 0 then pending = 0 end
  if used + pending + est > limit or used + pending >= limit then refused, at = 3, i; break end
end
if refused then
  undoReservations()
  -- The rate limits are checked before the quotas (a request over both is told about its rate limit):
  -- read them, limiter j's requests, then its tokens.
  for j = 1, nl do
    local rpm = A[la + 2 * j - 1]
    if rpm ~= '0' then
      local c = call('GET', K[2 * j])
      if c and tonumber(c) + 1 > tonumber(rpm) then return 100 + j end
    end
    local tpm = A[la + 2 * j]
    if tpm ~= '0' and tokens > 0 then
      local c = call('GET', K[2 * j + 1])
      if c then
        c = tonumber(c)
        if c > 0 and c + tokens > tonumber(tpm) then return 200 + j end
      end
    end
  end
  return 300 + at
end
-- Rate limits, in order: limiter j's requests, then its tokens, counted first as well (INCR/INCRBY
-- answer the new count). fresh lists the windows this call created.
local fresh
local lj, lt = 0, false -- the limiters counted: 1..lj, the tokens of lj only if lt
for j = 1, nl do
  lj, lt = j, false
  local rpm = A[la + 2 * j - 1]
  if rpm ~= '0' then
    local c = call('INCR', K[2 * j])
    if c == 1 then fresh = fresh or {}; fresh[#fresh + 1] = K[2 * j] end
    if c > tonumber(rpm) then refused, at = 1, j; break end
  end
  local tpm = A[la + 2 * j]
  if tpm ~= '0' and tokens > 0 then
    local c = call('INCRBY', K[2 * j + 1], A[2])
    lt = true
    if c == tokens then fresh = fresh or {}; fresh[#fresh + 1] = K[2 * j + 1] end
    -- An empty window admits one request even when its estimate alone exceeds the limit, so an
    -- oversized request is not refused forever: refused only if it counted before (c > tokens).
    if c > tokens and c > tonumber(tpm) then refused, at = 2, j; break end
  end
end
if refused then
  undoReservations()
  for j = lj, 1, -1 do
    if A[la + 2 * j] ~= '0' and tokens > 0 and (j < lj or lt) then uncount(K[2 * j + 1], A[2]) end
    if A[la + 2 * j - 1] ~= '0' then uncount(K[2 * j], '1') end
  end
  return refused * 100 + at
end
if reserve then
  local pendingTTL = A[4]
  for i = 1, n do
    call('EXPIRE', K[b + 3 * i - 2], pendingTTL)
    if marked then
      local qe = K[b + 3 * i]
      call('ZADD', qe, A[7], member)
      call('EXPIRE', qe, pendingTTL)
    end
  end
  if marked then call('SETEX', K[1], '604800', 'h') end -- markerTTL (admission.go)
end
if fresh then
  for x = 1, #fresh do call('EXPIRE', fresh[x], '120') end -- rateWindowTTL (admission.go)
end
return 0
