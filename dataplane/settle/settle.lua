-- After the control plane answered a Settle batch: refresh the cost_used mirror, then for every record
-- acknowledge its outbox entry and — only if this call's XACK removed it from the pending list, so at most
-- once however often the batch is retried or claimed — refund its exact pending hold and correct the
-- key's TPM count by (actual − estimated) tokens. The entry is then deleted from the stream.
--
-- A marked hold (admission's qh:{request id} marker) is refunded, and its TPM count corrected, only while
-- its marker says it is held; the marker is then deleted. So a record that reached both the outbox and
-- the spill (an append that landed after the recorder gave up on it) is refunded once.
--
-- A hold with expiring members (mode 2, admission's qe: sets) is subtracted from a scope's qp: only if
-- this call removed its member from that scope's qe: set: a hold admission already expired (it outlived
-- the pending TTL) is not subtracted twice.
--
-- KEYS[1] the outbox stream; KEYS[2 .. 1+nq] qu: mirror keys; then per record its ns qp: keys, in mode 2
-- followed by its ns qe: keys, then its nt TPM window keys and its hold marker key.
-- ARGV[1] group, ARGV[2] mirror TTL seconds, ARGV[3] nq, ARGV[4 .. 3+2nq] per mirror its answered
-- cost_used (micros) and that answer's adjustment epoch, ARGV[4+2nq] record count, then per record: entry
-- id (empty for a spilled record), hold micros, ns, nt, TPM delta, mode (0 unmarked, 1 marked, 2 marked
-- with expiring members), the hold's member.
-- Reply: number of holds refunded.
local stream = KEYS[1]
local grp = ARGV[1]
local mttl = tonumber(ARGV[2])
local nq = tonumber(ARGV[3])
-- The mirror is '<micros>' (adjustment epoch 0) or '<micros>:<epoch>' (docs/settlement.md, "Adjustment
-- epochs"). Within an epoch cost_used only grows (settlement): keep the largest answer, so a late reply
-- to an older batch never lowers the mirror. An answer of a newer epoch replaces the mirror even when
-- lower (an operator's credit); one of an older epoch, computed before an adjustment, is ignored.
for i = 1, nq do
  local k = KEYS[1 + i]
  local v = tonumber(ARGV[2 + 2 * i])
  local e = tonumber(ARGV[3 + 2 * i])
  local s = redis.call('GET', k)
  local cur, ce = -1, -1
  if s then
    local mv, me = string.match(s, '^(%d+):(%d+)$')
    if mv then cur, ce = tonumber(mv), tonumber(me) else cur, ce = tonumber(s) or -1, 0 end
  end
  if e > ce or (e == ce and v > cur) then
    local val = ARGV[2 + 2 * i]
    if e > 0 then val = val .. ':' .. ARGV[3 + 2 * i] end
    redis.call('SET', k, val, 'EX', mttl)
  else
    redis.call('EXPIRE', k, mttl)
  end
end
local a = 4 + 2 * nq
local nrec = tonumber(ARGV[a])
a = a + 1
local k = 2 + nq
local refunded = 0
for r = 1, nrec do
  local id = ARGV[a]
  local micros = tonumber(ARGV[a + 1])
  local ns = tonumber(ARGV[a + 2])
  local nt = tonumber(ARGV[a + 3])
  local td = tonumber(ARGV[a + 4])
  local mode = ARGV[a + 5]
  local member = ARGV[a + 6]
  local marked = mode == '1' or mode == '2'
  a = a + 7
  local nz = 0
  if mode == '2' then nz = ns end
  local mk = KEYS[k + ns + nz + nt]
  -- An empty id is a spilled record (never in the stream): refund it now, once by its marker.
  local due = id == '' or redis.call('XACK', stream, grp, id) == 1
  if due and marked then
    due = redis.call('GET', mk) == 'h'
    if due then redis.call('DEL', mk) end
  end
  if due then
    if micros > 0 then
      for j = 0, ns - 1 do
        local pk = KEYS[k + j]
        local held = true
        if mode == '2' then held = redis.call('ZREM', KEYS[k + ns + j], member) == 1 end
        if held and redis.call('EXISTS', pk) == 1 then
          local v = redis.call('DECRBY', pk, micros)
          if v <= 0 then redis.call('DEL', pk) end
        end
      end
    end
    if td ~= 0 then
      for j = 0, nt - 1 do
        local tk = KEYS[k + ns + nz + j]
        if redis.call('EXISTS', tk) == 1 then
          local v = redis.call('INCRBY', tk, td)
          if v < 0 then redis.call('SET', tk, '0', 'KEEPTTL') end
        end
      end
    end
    refunded = refunded + 1
  end
  if id ~= '' then redis.call('XDEL', stream, id) end
  k = k + ns + nz + nt + 1
end
return refunded
