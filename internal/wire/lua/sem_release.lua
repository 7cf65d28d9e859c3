-- sem_release.lua: give back the permits of one semaphore hold, once, and grant them on to the
-- waiters at the head of the queue (see grantPermits).
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] channel (as in
--         sem_acquire.lua)
-- ARGV[1] hold id
-- Returns {0, clients woken} when released, {-1, 0} when the hold does not exist (released
-- already, or its lease ended: its permits came back then). A repeat finds nothing to release.
-- The fast path answers {0, 0} as the integer 0 (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- This hold is the lone one (see leases.lua: live while the hash exists) and nobody waits: the
-- keys go, before any helper is made (see scripts.go). FAST_GOT keeps the HMGET for the body.
local FAST_GOT = redis.call('hmget', KEYS[1], FIELD_KIND, FIELD_PERMITS, FIELD_USED, ARGV[1], FIELD_LONE)
if FAST_GOT[1] == 'sem' and FAST_GOT[4] and FAST_GOT[5] == ARGV[1] and redis.call('exists', KEYS[3], KEYS[4]) == 0 then
  redis.call('del', KEYS[1], KEYS[2])
  return 0 -- {0, 0}, see Script.Ints
end
-- } fast path
local H, L, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local got = FAST_GOT -- kind, permits, in use, this hold's permits, the lone hold
mustBeKind(H, 'sem', got[1])
-- Fast path: this hold has every permit in use (so it is the only hold), its lease is live,
-- and nobody waits: the keys go, as the full path below would leave it. (The queue's first
-- entry, read to tell, serves the full path's liveHead.)
local first
if got[4] and got[3] == got[4] then
  first = redis.call('lindex', Q, 0)
  if not first and redis.call('exists', D) == 0 and tonumber(redis.call('zscore', L, id) or '0') > now() then
    redis.call('del', H, L)
    return {0, 0}
  end
end
local t = now()
-- Read the leases, the queue and the deadlines before any write (a key of the wrong type
-- raises with nothing changed): the holds whose lease ended, and the queue's live head.
local dead = redis.call('zrangebyscore', L, '-inf', t)
local head = liveHead(Q, D, t, first)
spread(H, L, t, got[5]) -- a lone hold's lease goes into the leases: every hold is there below
local used, lapsedHolds = dropLapsedSem(H, L, t, tonumber(got[3] or '0'), dead)
local n = got[4]
if lapsedHolds > 0 then
  n = redis.call('hget', H, id) -- this hold may have been one of them
end
local woken, granted = 0, nil
if n then
  used = used - tonumber(n)
  redis.call('hdel', H, id, labels(id))
  redis.call('zrem', L, id)
end
if got[2] then
  used, woken, granted = grantPermits(H, L, Q, D, C, t, used, tonumber(got[2]), head)
end
keepSem(H, L, Q, D, t, used, nil, granted)
if not n then
  return {-1, 0}
end
return {0, woken}
