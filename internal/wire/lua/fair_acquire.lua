-- fair_acquire.lua: take a fair lock in arrival order, re-enter it, or wait in its queue; a
-- replayed request returns its recorded outcome instead of counting again.
-- KEYS[1] lock hash (as in acquire.lua)
-- KEYS[2] queue: waiting owners in arrival order (list)
-- KEYS[3] deadlines: owner -> server time (ms) after which the waiter has lost its place (zset)
-- KEYS[4] fencing counter (touched only when ARGV[5] == '1')
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] request id (first 12 bytes: the client), recorded as in acquire.lua (no record for an
--         owner made for this call, whose id is the request id)
-- ARGV[4] mode, as in acquire.lua ('reenter' acts as 'take': a fair lock is never left free)
-- ARGV[5] '1' to issue a fencing token for a new hold
-- ARGV[6] FairWaitTimeout in milliseconds: a waiter's deadline is its last call plus this
-- ARGV[7] 'wait' to join the queue (or refresh the caller's deadline there), 'try' never to join
-- ARGV[8] claim in milliseconds: the lease a release that grants the lock to this waiter gives
--         it (direct handoff; the holder extends it once it has it), '0' to be woken instead
-- The caller's queue entry is owner, request id, claim and ARGV[5] (see queue.lua), so a
-- release can grant it the lock: it then holds the lock with request id ARGV[3] recorded in
-- the hash field "\1g" until it gives the grant back, and its next attempt finds it there.
-- Time is the server's (TIME), never a client clock. Waiters whose deadline passed are purged
-- from anywhere in the queue first; if the queue and the deadlines disagree (a key evicted or
-- edited), the queue is rebuilt from the owners that have a deadline. The lock goes to the
-- caller only when it is free and the caller heads the queue (or the queue is empty): nobody
-- jumps the queue.
-- A re-entry sets the lease to at least ARGV[2]: a lease is never shortened (see keepFor).
-- Returns {1, hold count, token} when acquired or re-entered, {1, hold count, token, pttl} when
-- a release granted it to this request (the lease is left as the grant made it; pttl >= 1), or
-- {0, pttl, head, joined} when not:
-- pttl is the holder's remaining lease (-1: no expiry, -2: free but another waiter is ahead),
-- head is 1 when the caller heads the queue, joined is 1 when this call put the caller's entry
-- in the queue (it was not there: first call, or its place was granted or lost meanwhile).
-- Queue and deadlines live at least ARGV[6] after the last call that touched them (a call never
-- shortens their expiry: other waiters may have longer timeouts). Everything is read before
-- anything is written: a key of the wrong type or a bad fencing counter raises an error with
-- nothing changed.
local owner, req, mode = ARGV[1], ARGV[3], ARGV[4]
local counter = ARGV[5] == '1' and KEYS[4]
local entry -- this call's queue entry, made past the fast path (only a queued take uses it)

local function take(pop)
  local t = fence(counter, true)
  if pop then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], entry)
  end
  redis.call('hset', KEYS[1], owner, 1)
  record(KEYS[1], owner, req, 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, t}
end

-- Fast path: no hash and no queue (one EXISTS for both): free, and nobody waits (and no
-- restart grace holds new grants back: see graceLeft).
local pttl = -2
local live = redis.call('exists', KEYS[1], KEYS[2])
if live == 0 and graceLeft() == 0 then
  if mode == 'resolve' then
    return {0, -2, 0}
  end
  if counter and badCounter(redis.call('get', counter)) then
    return redis.error_reply('ERR fencing counter is not an integer or out of range')
  end
  return take(false)
end
entry = queueEntry(owner, req, ARGV[8], ARGV[5])
do
  -- (Should the hash not exist, its fields read nil and PTTL -2: free, as above.) One HMGET
  -- reads the owner's count, its replay record, the kind and the grant record.
  local held = redis.call('hmget', KEYS[1], owner, marker(req, owner), FIELD_KIND, FIELD_GRANT)
  local n
  if owner == req and held[1] then
    n = tonumber(held[1]) -- an owner made for this request: any hold of it is the request's
  else
    n = recorded(held[2], req)
  end
  mustBeKind(KEYS[1], '', held[3])
  if held[1] and held[4] == req then
    -- in its last millisecond PTTL is 0: still a claim, of under 1 ms (never "no claim")
    local left = redis.call('pttl', KEYS[1])
    if left == 0 then
      left = 1
    end
    return {1, tonumber(held[1]), fence(counter, false), left}
  end
  if n then
    local t = fence(counter, false)
    if mode ~= 'resolve' then
      keepFor(KEYS[1], ARGV[2], false)
    end
    return {1, n, t}
  end
  if mode == 'resolve' then
    return {0, -2, 0}
  end
  if held[1] then
    local t = fence(counter, false)
    local count = redis.call('hincrby', KEYS[1], owner, 1)
    record(KEYS[1], owner, req, count)
    keepFor(KEYS[1], ARGV[2], false) -- never shortens the lease another hold of the owner has
    if redis.call('zscore', KEYS[3], entry) then
      leaveQueue(KEYS[2], KEYS[3], entry) -- queued before the owner took it elsewhere
    end
    return {1, count, t}
  end
  pttl = redis.call('pttl', KEYS[1])
end

-- Check the counter now: purging dead waiters below writes before a new hold's INCR would.
if counter and badCounter(redis.call('get', counter)) then
  return redis.error_reply('ERR fencing counter is not an integer or out of range')
end
if pttl == -2 and graceLeft() > 0 then
  pttl = graceLeft() -- a restarted server: as if held until its grace has passed
end
local head = redis.call('lindex', KEYS[2], 0)
if pttl == -2 and not head then
  return take(false) -- free, and nobody waits
end

local now = now()
local dead = redis.call('zrangebyscore', KEYS[3], '-inf', now)
for i = 1, #dead do
  redis.call('lrem', KEYS[2], 0, dead[i])
  redis.call('zrem', KEYS[3], dead[i])
end
local queued = redis.call('zcard', KEYS[3])
if redis.call('llen', KEYS[2]) ~= queued then
  -- One key lost entries the other has: keep the queued owners that have a deadline, once
  -- each and in queue order, then the owners that have a deadline but no place, by deadline.
  local seen, keep = {}, {}
  for _, o in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
    if not seen[o] and redis.call('zscore', KEYS[3], o) then
      seen[o] = true
      keep[#keep + 1] = o
    end
  end
  for _, o in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    if not seen[o] then
      seen[o] = true
      keep[#keep + 1] = o
    end
  end
  redis.call('del', KEYS[2])
  for i = 1, #keep, 1000 do
    redis.call('rpush', KEYS[2], unpack(keep, i, math.min(i + 999, #keep)))
  end
  if #keep > 0 then
    keepFor(KEYS[2], tonumber(ARGV[6]), true) -- made anew above
  end
  dead = {1}
end
if #dead > 0 then
  head = redis.call('lindex', KEYS[2], 0)
end

if pttl == -2 and (not head or head == entry) then
  return take(head ~= false and head ~= nil)
end

local joined = 0
if ARGV[7] == 'wait' then
  joined = joinQueue(KEYS[2], KEYS[3], entry, now, tonumber(ARGV[6]), queued == 0)
  head = head or entry
end
if head == entry then
  return {0, pttl, 1, joined}
end
return {0, pttl, 0, joined}
