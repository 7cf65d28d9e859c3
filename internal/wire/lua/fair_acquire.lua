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
-- ARGV[4] mode, as in acquire.lua ('reenter' acts as 'take': a fair lock is never left free),
--         or 'check': a waiter's look after it subscribed, writing nothing unless it finds its
--         request ran or was granted (then as 'take'); reply {0, -2, 0} when a take could
--         succeed or re-enter, or must join again (the caller's place is gone), {0, pttl, head,
--         0} (pttl >= 1 or -1) when the lock is another owner's and the caller's place is there
-- ARGV[5] '1' to issue a fencing token for a new hold
-- ARGV[6] FairWaitTimeout in milliseconds: a waiter's deadline is its last call plus this
-- ARGV[7] 'wait' to join the queue (or refresh the caller's deadline there), 'try' never to join
-- ARGV[8] claim in milliseconds: the lease a release that grants the lock to this waiter gives
--         it (direct handoff; the holder extends it once it has it), '0' to be woken instead
-- ARGV[9] label of the hold and of the wait (optional; '' or none: unlabelled): see labelHold in
--         lib.lua, and queueEntry in queue.lua (a granted hold gets its entry's label)
-- The caller's queue entry is owner, request id, claim, ARGV[5] and ARGV[9] (see queue.lua), so a
-- release can grant it the lock: it then holds the lock with request id ARGV[3] recorded in
-- the hash field "\1g" until it gives the grant back, and its next attempt finds it there.
-- Time is the server's (TIME), never a client clock. Waiters whose deadline passed are purged
-- from anywhere in the queue first; if the queue and the deadlines disagree (a key evicted or
-- edited), the queue is rebuilt from the owners that have a deadline. The lock goes to the
-- caller only when it is free and the caller heads the queue (or the queue is empty): nobody
-- jumps the queue.
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
-- A re-entry sets the lease to at least ARGV[2]: a lease is never shortened (see keepFor).
-- The fast path answers {1, 1, 0} as the integer 1 (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- A free lock (no hash) that nobody waits for (no queue), taken without fencing, before any
-- helper is made (see scripts.go), as takeFair does it; FAST_EXISTS keeps EXISTS's answer
-- for fairRead.
local FAST_EXISTS
if GRACE == 0 and ARGV[5] ~= '1' and (ARGV[4] == 'take' or ARGV[4] == 'reenter') and (ARGV[9] or '') == '' then
  FAST_EXISTS = redis.call('exists', KEYS[1], KEYS[2])
  if FAST_EXISTS == 0 then
    if ARGV[1] == ARGV[3] then
      redis.call('hset', KEYS[1], ARGV[1], 1)
    else
      redis.call('hset', KEYS[1], ARGV[1], 1, '\0' .. string.sub(ARGV[3], 1, 12) .. ARGV[1], ARGV[3] .. ':1')
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1 -- {1, 1, 0}, see Script.Ints
  end
end
-- } fast path
local owner, req, mode = ARGV[1], ARGV[3], ARGV[4]
local counter = ARGV[5] == '1' and KEYS[4]
local a = {H = KEYS[1], Q = KEYS[2], D = KEYS[3], F = KEYS[4], owner = owner, req = req,
  entry = queueEntry(owner, req, ARGV[8], ARGV[5], ARGV[9]), extra = ARGV[5], lease = ARGV[2]}

local what, x, head, cur = fairRead(a.H, a.Q, a.F, owner, req, a.extra, mode, FAST_EXISTS) -- see mutex.lua
if what == 'free' then
  local tok = takeFair(a, false, nil, x)
  labelHold(a.H, owner, ARGV[9])
  return {1, 1, tok}
elseif what == 'bad' then
  return x
elseif what == 'none' then
  return {0, -2, 0}
elseif what == 'check' then
  -- A look proves that no grant for this call came before it only while the call's place is
  -- there (a grant takes it): without it, a grant may have come and gone (its claim ran out),
  -- and a take must join again.
  if not redis.call('zscore', a.D, a.entry) then
    return {0, -2, 0}
  end
  if x == 0 then
    x = 1 -- its last millisecond: still held (pttl -2 alone says a take could succeed)
  end
  local me = 0
  if head == a.entry then
    me = 1
  end
  return {0, x, me, 0}
elseif what == 'grant' then
  -- in its last millisecond PTTL is 0: still a claim, of under 1 ms (never "no claim")
  local left = redis.call('pttl', a.H)
  if left == 0 then
    left = 1
  end
  return {1, x, fence(counter, false), left}
elseif what == 'ran' then
  local t = fence(counter, false)
  if mode ~= 'resolve' then
    extend(a.H, ARGV[2])
  end
  return {1, x, t}
elseif what == 'held' then
  local t = fence(counter, false)
  local count = reenterHold(a.H, owner, req, ARGV[2])
  labelHold(a.H, owner, ARGV[9])
  if redis.call('zscore', a.D, a.entry) then
    leaveQueue(a.Q, a.D, a.entry) -- queued before the owner took it elsewhere
  end
  return {1, count, t}
end
local r = queueFair(a, tonumber(ARGV[6]), ARGV[7] == 'wait', x, head, cur)
if r[1] == 1 then
  labelHold(a.H, owner, ARGV[9])
end
return r
