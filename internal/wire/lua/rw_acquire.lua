-- rw_acquire.lua: take a read or write hold of a read-write lock, re-enter one, or wait; a
-- replayed request returns its recorded outcome instead of counting again.
-- KEYS[1] hash: "r:<owner>" / "w:<owner>" -> read / write hold count, "\1w" -> the writer, "\1k" = "rw",
--         replay records (see lib.lua)
-- KEYS[2] leases: "r:<owner>" / "w:<owner>" -> lease end (server ms); one lease per hold kind
--         of each owner, so a reader that dies loses only its own read holds
-- KEYS[3] waiting writers (plain): owner -> deadline (server ms); a waiting writer holds back
--         new readers
-- KEYS[4] queue (fair): "r:<owner>" / "w:<owner>" in arrival order
-- KEYS[5] deadlines (fair): queue entry -> deadline (server ms)
-- KEYS[6] fencing counter (touched only when ARGV[6] == '1')
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] request id (see lib.lua)
-- ARGV[4] mode: 'take', 'reenter' (re-enter only; reply {0, -2, 0} otherwise) or 'resolve'
-- ARGV[5] 'r' for a read hold, 'w' for a write hold
-- ARGV[6] '1' to read (and, for a new write hold, increment) the fencing counter
-- ARGV[7] FairWaitTimeout in milliseconds: a waiter's deadline is its last call plus this
-- ARGV[8] 'wait' to wait (join or refresh the waiting writers or the queue), 'try' not to
-- ARGV[9] 'fair' for arrival order with reader batches, 'plain' for writer preference
-- ARGV[10] fair: claim in milliseconds, the lease of a hold a release grants this waiter
--         (direct handoff), '0' to be woken instead. Its queue entry is "<r|w>:<owner>", request
--         id, claim and ARGV[6] (see queue.lua); a granted hold is recorded as
--         "\1g<r|w>:<owner>" = request id, and this request's next attempt finds it there.
-- ARGV[11] label of the hold and of the wait (optional; '' or none: unlabelled): see labelHold
--         in lib.lua, and queueEntry in queue.lua (fair: a granted hold gets its entry's label;
--         plain: a waiting writer's label is not kept)
-- Returns {1, hold count, token} when acquired or re-entered (a read hold's token is the
-- counter as it is: the last writer's token), {1, hold count, token, pttl} when a release
-- granted it to this request (pttl: what is left of the hold's lease, not extended), {0, pttl, next} when not: pttl bounds the wait
-- (the holders' latest lease end, or until the first waiting writer's place runs out while
-- only waiters are ahead; -2: free but another waiter is ahead), next is 1 when the caller is among those who go next
-- (fair: a 4th element, joined, is 1 when this call put the caller's entry in the queue); or {-1}
-- when an owner with only read holds asks to write (an upgrade would deadlock): nothing is
-- written. Time is the server's. Everything is read before anything is written: a key of the
-- wrong type or a bad fencing counter raises an error with nothing changed.
-- The fast path answers {1, 1, 0} as the integer 1 (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- None of the lock's keys exists (one EXISTS for all): free, and nobody waits; a hold taken
-- without fencing is a lone hold (see leases.lua), written before any helper is made (see
-- scripts.go) as the body's fast path writes it. FAST_EXISTS keeps EXISTS's answer for it.
local FAST_EXISTS
if GRACE == 0 and ARGV[6] ~= '1' and (ARGV[11] or '') == '' then
  FAST_EXISTS = redis.call('exists', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
  if FAST_EXISTS == 0 then
    if ARGV[4] ~= 'take' then
      return {0, -2, 0}
    end
    local field = ARGV[5] .. ':' .. ARGV[1]
    local rec = ARGV[1] ~= ARGV[3] and '\0' .. string.sub(ARGV[3], 1, 12) .. ARGV[1]
    if ARGV[5] == 'w' then
      redis.call('hset', KEYS[1], field, 1, FIELD_KIND, 'rw', FIELD_LONE, field, FIELD_WRITER, ARGV[1], rec or field,
        rec and ARGV[3] .. ':1' or 1)
    else
      redis.call('hset', KEYS[1], field, 1, FIELD_KIND, 'rw', FIELD_LONE, field, rec or field, rec and ARGV[3] .. ':1' or 1)
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1 -- {1, 1, 0}, see Script.Ints
  end
end
-- } fast path
local H, L, W, Q, D = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, lease, req, mode, acc = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local counter = ARGV[6] == '1' and KEYS[6]
local wait, join, fair = tonumber(ARGV[7]), ARGV[8] == 'wait', ARGV[9] == 'fair'
local field = acc .. ':' .. owner
local label = ARGV[11]

-- Fast path: none of the lock's keys exists (one EXISTS for all): free, and nobody waits (and
-- no restart grace holds new grants back: see graceLeft).
if (FAST_EXISTS or redis.call('exists', H, L, W, Q, D)) == 0 and graceLeft() == 0 then
  if mode ~= 'take' then
    return {0, -2, 0}
  end
  local bad = counterError(counter, acc == 'w')
  if bad then
    return bad
  end
  -- a lone hold: its lease is the hash's expiry (see leases.lua)
  local rec = owner ~= req and marker(req, owner)
  if acc == 'w' then
    redis.call('hset', H, field, 1, FIELD_KIND, 'rw', FIELD_LONE, field, FIELD_WRITER, owner, rec or field,
      rec and req .. ':1' or 1)
  else
    redis.call('hset', H, field, 1, FIELD_KIND, 'rw', FIELD_LONE, field, rec or field, rec and req .. ':1' or 1)
  end
  labelHold(H, field, label)
  redis.call('pexpire', H, lease)
  return {1, 1, fence(counter, acc == 'w')}
end

local entry = queueEntry(field, req, ARGV[10], ARGV[6], label)
-- One HMGET reads every field of the hash this call needs: kind, this request's grant, the
-- hold count of this kind, the replay record, the owner's holds of both kinds, the writer, the
-- lone hold.
local function fields()
  return redis.call('hmget', H, FIELD_KIND, FIELD_GRANT .. field, field, marker(req, owner), 'r:' .. owner,
    'w:' .. owner, FIELD_WRITER, FIELD_LONE)
end
local f = fields()
mustBeKind(H, 'rw', f[1])
-- Every key is read before anything is written (a key of the wrong type raises with nothing
-- changed): the holds whose lease ended (none while a lone hold is the only one, see
-- leases.lua, nor when there are no leases: without the hash, which the leases never outlive,
-- one ZCARD tells); the waiting writers (plain: their count, which also says whether W exists)
-- or the waiters whose place ran out and the queue (fair). A plain writer reads W only when it
-- must, unless lapsed holds are dropped first: its first use of W is then its first write,
-- which raises for a W of the wrong type with nothing changed.
local t = now()
local deadL = {}
local noLeases = not f[8] and not f[1] and redis.call('zcard', L) == 0
if not f[8] and not noLeases then
  deadL = redis.call('zrangebyscore', L, '-inf', t)
end
local wn, deadD, entries = nil, nil, nil
if fair then
  deadD = redis.call('zrangebyscore', D, '-inf', t)
  entries = redis.call('lrange', Q, 0, -1)
elseif acc == 'r' or #deadL > 0 then
  wn = redis.call('zcard', W)
end
-- (A writer without a write hold takes a new one or waits for one: at 2^53 it can have no
-- token.)
local bad = counterError(counter, acc == 'w' and not f[3])
if bad then
  return bad
end

-- A lone hold (see leases.lua) goes into the leases before this call writes a lease or reads
-- them all (spreadOnce); a call that only waits or writes nothing leaves it where it is.
local spreadDone = false
local function spreadOnce()
  if not spreadDone then
    spread(H, L, t, f[8])
    spreadDone = true
  end
end
if dropLapsedRW(H, L, t, deadL) > 0 then
  f = fields() -- a lapsed hold may have been one of those read
end

-- hold gives owner's hold of this kind a lease of at least ARGV[2] from now (GT: a lease is
-- never shortened, so a re-entry with a shorter lease leaves the longer one) and the keys
-- their expiry.
local function hold(count, new)
  spreadOnce()
  redis.call('zadd', L, 'GT', t + lease, field)
  expireWith(H, L, t, 0)
  local tok = fence(counter, new)
  return {1, count, tok}
end

if f[2] == req and f[3] then
  local ends = redis.call('zscore', L, field)
  return {1, tonumber(f[3]), fence(counter, false), math.max(tonumber(ends or '0') - t, 1)}
end
local n
if owner == req and f[3] then
  n = tonumber(f[3]) -- an owner made for this request: any hold of it is the request's
else
  n = recorded(f[4], req)
end
if n then
  if mode == 'resolve' then
    return {1, n, fence(counter, false)}
  end
  return hold(n, false)
end
if mode == 'resolve' then
  return {0, -2, 0}
end

if f[6] or (acc == 'r' and f[5]) then
  -- Re-entry, or the writer taking a read hold: never waits.
  local count = redis.call('hincrby', H, field, 1)
  record(H, owner, req, count)
  labelHold(H, field, label)
  if fair and redis.call('zscore', D, entry) then
    leaveQueue(Q, D, entry) -- queued before the owner took it elsewhere
  end
  return hold(count, false)
end
if acc == 'w' and f[5] then
  return {-1}
end
if mode == 'reenter' then
  return {0, -2, 0}
end

-- The latest lease (none when nobody holds): whether anyone holds, and until when; a lone
-- hold's is the hash's expiry.
local last = {} -- (none without leases)
if f[8] then
  local at = loneEnd(H)
  last = at and {f[8], at} or {}
elseif not noLeases then
  last = redis.call('zrange', L, -1, -1, 'WITHSCORES')
end
local writer = f[7]
local held = last[2] ~= nil
local grace = graceLeft()
if grace > 0 then
  -- a restarted server: as if a writer held the lock until its grace has passed
  writer = writer or ''
  held = true
end

-- bound is how long a waiter may sleep: until the latest lease ends (an expiry publishes
-- nothing), or FairWaitTimeout when only waiters are ahead; not before the grace has passed.
local function bound()
  if last[2] then
    return math.max(tonumber(last[2]) - t, grace, 1)
  end
  if grace > 0 then
    return grace
  end
  return wait
end

local function take(new)
  local set = {'hset', H, field, 1, FIELD_KIND, 'rw'}
  if acc == 'w' then
    set[#set + 1], set[#set + 2] = FIELD_WRITER, owner
  end
  if owner ~= req then
    set[#set + 1], set[#set + 2] = marker(req, owner), req .. ':1' -- its record (see record)
  end
  if not held and not f[8] then
    -- nobody holds: a lone hold, its lease the hash's expiry (see leases.lua)
    set[#set + 1], set[#set + 2] = FIELD_LONE, field
    redis.call(unpack(set))
    labelHold(H, field, label)
    redis.call('pexpire', H, lease)
    return {1, 1, fence(counter, new)}
  end
  redis.call(unpack(set))
  labelHold(H, field, label)
  return hold(1, new)
end

if not fair then
  if acc == 'r' then
    if writer then
      return {0, bound(), 0}
    end
    -- held back by waiting writers: look again when the first of their places runs out,
    -- which publishes nothing (a writer that died while waiting)
    local first = wn > 0 and redis.call('zrangebyscore', W, '(' .. t, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if first and first[2] then
      return {0, math.max(tonumber(first[2]) - t, 0) + 1, 0}
    end
    return take(false)
  end
  if held then
    -- the usual contended case: wait (refresh the place); the holders' leases bound the sleep
    if join then
      redis.call('zadd', W, t + wait, writerMember(owner, label))
      keepFor(W, wait, wn == 0) -- (wn nil: not read, W's expiry is extended if it has one)
    end
    return {0, bound(), 1}
  end
  local waiting, queued = 0, nil
  if wn ~= 0 then
    redis.call('zremrangebyscore', W, '-inf', t)
    waiting = redis.call('zcard', W)
    queued = waiting > 0 and redis.call('zscore', W, writerMember(owner, label))
    if queued then
      waiting = waiting - 1
    end
  end
  if join or waiting == 0 then
    if queued then
      redis.call('zrem', W, writerMember(owner, label))
    end
    return take(true)
  end
  return {0, -2, 0}
end

-- Fair: waiters whose place ran out leave the queue (as purgeQueue does, with the queue read
-- above), and so do heads without a deadline (a key evicted or edited).
if #deadD > 0 then
  for _, e in ipairs(deadD) do
    redis.call('lrem', Q, 0, e)
  end
  redis.call('zremrangebyscore', D, '-inf', t)
  entries = redis.call('lrange', Q, 0, -1)
end
while entries[1] and not redis.call('zscore', D, entries[1]) do
  redis.call('lpop', Q)
  table.remove(entries, 1)
end
-- The next to go are the entries up to the first writer (readers), or that writer alone when
-- it heads the queue.
local pos, firstWriter = nil, nil
for i, e in ipairs(entries) do
  if not pos and e == entry then
    pos = i
  end
  if not firstWriter and string.sub(e, 1, 2) == 'w:' then
    firstWriter = i
  end
end
local next
if acc == 'r' then
  -- a reader goes with the readers ahead of the first queued writer (all of them, when it is
  -- not queued itself, only if no writer is queued)
  next = (pos and (not firstWriter or pos < firstWriter)) or (not pos and not firstWriter)
  if next and not writer then
    if pos then
      leaveQueue(Q, D, entry)
    end
    return take(false)
  end
else
  next = (pos == 1) or (not pos and #entries == 0)
  if next and not held then
    if pos then
      leaveQueue(Q, D, entry)
    end
    return take(true)
  end
end
local joined = 0
if join then
  joined = joinQueue(Q, D, entry, t, wait, false)
  if not pos then
    if acc == 'r' then
      next = not firstWriter
    else
      next = #entries == 0
    end
  end
end
if not held then
  return {0, -2, next and 1 or 0, joined}
end
return {0, bound(), next and 1 or 0, joined}
