-- sem_acquire.lua: take n permits of a semaphore as one hold, in arrival order, or wait in its
-- queue; a replayed request returns its recorded outcome instead of taking more.
-- KEYS[1] hash: "\1k" = "sem", "\1p" -> permits, "\1u" -> permits held, "<hold id>" -> permits of that hold.
--         It exists while anyone holds or waits, so the permit count is checked against it.
-- KEYS[2] leases: hold id -> lease end (server ms)
-- KEYS[3] queue: waiting hold ids in arrival order
-- KEYS[4] deadlines: waiting hold id -> deadline (server ms)
-- KEYS[5] channel
-- ARGV[1] hold id (the request id of the Acquire call: every Acquire is a new hold)
-- ARGV[2] lease in milliseconds
-- ARGV[3] request id (equal to the hold id; a hold that exists is this request's)
-- ARGV[4] mode: 'take', 'resolve' (report whether the hold exists, change nothing) or 'check':
--         a waiter's look after it subscribed: as 'take' when its hold exists (granted);
--         otherwise it writes nothing and replies {0, -2, 0} when a take could succeed (permits
--         free, a lease ended, or anything a take must sort out, such as the caller's place
--         gone), else {0, pttl, head, 0}
-- ARGV[5] permits of the semaphore (at most 2^53, the integers Lua keeps exact: the library
--         refuses more), stored and compared as given
-- ARGV[6] n, permits this hold takes (1..permits)
-- ARGV[7] FairWaitTimeout in milliseconds: a waiter's deadline is its last call plus this
-- ARGV[8] 'wait' to join (or refresh its place in) the queue, 'try' never to join
-- ARGV[9] claim in milliseconds: the lease of a hold a release grants this waiter (direct
--         handoff), '0' to be woken instead. Its queue entry is hold id, request id, claim and
--         n and ARGV[10] (see queue.lua).
-- ARGV[10] label of the hold and of the wait (optional; '' or none: unlabelled): see labelHold
--         in lib.lua, and queueEntry in queue.lua (a granted hold gets its entry's label)
-- Only the head of the queue (or anyone, when nobody waits) takes permits, so a large request
-- is never overtaken by smaller ones; a release, or a head that takes permits while some
-- remain, grants them on to the next waiters that fit (see grantPermits). Holds whose lease
-- ended give their permits back, and waiters whose deadline passed lose their place, at the
-- next call.
-- Returns {1, 1, 0, pttl} when the hold exists (taken by this request or granted to it; pttl
-- is what is left of its lease, which a repeat does not extend), {1, 1, 0} when acquired now,
-- {0, pttl, head, joined} when not (pttl: until the first lease ends, -2: none; head 1: the
-- caller is next; joined 1: this call put its entry in the queue), or {-3, permits stored} when the semaphore is in use with another permit count
-- (nothing is written).
-- The fast path answers {1, 1, 0} as the integer 1 (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- None of the semaphore's keys exists (one EXISTS for all): every permit is free and nobody
-- waits; the hold is a lone hold (see leases.lua), written before any helper is made (see
-- scripts.go) as the body's fast path writes it. FAST_EXISTS keeps EXISTS's answer for it.
local FAST_EXISTS
if GRACE == 0 and ARGV[4] == 'take' and (ARGV[10] or '') == '' then
  FAST_EXISTS = redis.call('exists', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  if FAST_EXISTS == 0 and tonumber(ARGV[6]) <= tonumber(ARGV[5]) then
    redis.call('hset', KEYS[1], ARGV[1], ARGV[6], FIELD_KIND, 'sem', FIELD_PERMITS, ARGV[5], FIELD_USED, ARGV[6],
      FIELD_LONE, ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1 -- {1, 1, 0}, see Script.Ints
  end
end
-- } fast path
local H, L, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, lease, req, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local permits, n, wait, join = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == 'wait'

-- Fast path: none of the semaphore's keys exists (one EXISTS for all): every permit is free,
-- nobody waits, and no restart grace holds new grants back (see graceLeft).
if (FAST_EXISTS or redis.call('exists', H, L, Q, D)) == 0 and graceLeft() == 0 then
  if mode ~= 'take' then
    return {0, -2, 0}
  end
  if n <= permits then
    -- a lone hold: its lease is the hash's expiry (see leases.lua)
    redis.call('hset', H, id, ARGV[6], FIELD_KIND, 'sem', FIELD_PERMITS, ARGV[5], FIELD_USED, ARGV[6], FIELD_LONE, id)
    labelHold(H, id, ARGV[10])
    redis.call('pexpire', H, lease)
    return {1, 1, 0}
  end
end

local entry = queueEntry(id, req, ARGV[9], ARGV[6], ARGV[10])
-- One HMGET: the kind, the permit count, the permits in use, this hold's (nil: no hold) and the
-- lone hold (see leases.lua).
local got = redis.call('hmget', H, FIELD_KIND, FIELD_PERMITS, FIELD_USED, id, FIELD_LONE)
mustBeKind(H, 'sem', got[1])
if mode == 'check' and not got[4] then
  if not got[1] or got[2] ~= ARGV[5] or n <= permits - math.max(tonumber(got[3] or '0'), 0) then
    return {0, -2, 0}
  end
  -- No place: a grant may have come and gone; a take joins again. (A lone hold means nobody
  -- has a place: the first waiter moves it into the leases.)
  if got[5] or not redis.call('zscore', D, entry) then
    return {0, -2, 0}
  end
  local t = now()
  local first = redis.call('zrange', L, 0, 0, 'WITHSCORES')[2]
  if not first or tonumber(first) <= t then
    return {0, -2, 0} -- a lease ended (or none is there): a take gives its permits back
  end
  if redis.call('lindex', Q, 0) == entry then
    return {0, tonumber(first) - t, 1, 0}
  end
  return {0, tonumber(first) - t, 0, 0}
end
local stored = got[2]
local t = now()
-- Read the leases, the deadlines and the queue before any write (a key of the wrong type
-- raises with nothing changed): holds whose lease ended, waiters whose place ran out, the head.
local deadL = redis.call('zrangebyscore', L, '-inf', t)
local deadD = redis.call('zrangebyscore', D, '-inf', t)
local head = redis.call('lindex', Q, 0)
if stored and stored ~= ARGV[5] and
    (got[5] or redis.call('zcount', L, '(' .. t, '+inf') > 0 or redis.call('zcount', D, '(' .. t, '+inf') > 0) then
  return {-3, tonumber(stored)}
end
spread(H, L, t, got[5]) -- a lone hold's lease goes into the leases: every hold is there below

local used, mine = math.max(tonumber(got[3] or '0'), 0), got[4]
if #deadL > 0 then
  used = dropLapsedSem(H, L, t, nil, deadL)
  mine = redis.call('hget', H, id) -- this hold may have been one of them
end
-- The queue is purged only when a place ran out or the head has no deadline (an edit); an
-- empty queue's deadlines are counted, so that a join knows it makes them anew.
local purged = #deadD > 0 or (head and not redis.call('zscore', D, head))
local freshD = false
if purged then
  head = purgeQueue(Q, D, t)
elseif not head then
  freshD = redis.call('zcard', D) == 0
end

local ends = (mine or mode == 'resolve') and redis.call('zscore', L, id)
if ends or mode == 'resolve' then
  keepSem(H, L, Q, D, t, used, permits) -- stores the permits that lapsed holds gave back
  if ends then
    return {1, 1, 0, math.max(tonumber(ends) - t, 1)}
  end
  return {0, -2, 0}
end

local grace = graceLeft() -- a restarted server grants nothing new until its grace has passed
if (not head or head == entry) and n <= permits - used and grace == 0 then -- (a sum could round)
  used = used + n
  redis.call('zadd', L, t + lease, id)
  local held = {id, n} -- written with the permits in use (keepSem: one HSET)
  if (ARGV[10] or '') ~= '' then -- labelled (see labelHold), in the same HSET
    local l, since = labels(id)
    held[3], held[4], held[5], held[6] = l, ARGV[10], since, t
  end
  if head then
    leaveQueue(Q, D, entry)
    local woken, granted
    used, woken, granted = grantPermits(H, L, Q, D, C, t, used, permits)
    for _, x in ipairs(granted) do
      held[#held + 1] = x
    end
  end
  keepSem(H, L, Q, D, t, used, permits, held)
  return {1, 1, 0}
end

local joined = 0
if join then
  joined = joinQueue(Q, D, entry, t, wait, freshD)
  head = head or entry
end
if got[1] and stored == ARGV[5] and #deadL == 0 and not purged then
  -- Nothing held changed and the hash has its fields: the hash and the leases (which share
  -- its expiry, see keepSem) only must outlive this waiter's place; their expiry covers every
  -- lease and every other place already. Both have one (the script that made them set it, and
  -- were it edited away, the next release's keepSem sets it again), so GT alone does, and
  -- only when the hash's expiry (which the leases share) ends before this place: a hold's
  -- lease usually outlives a place.
  -- (L first, at one instant: see expireWith.)
  if join and redis.call('pttl', H) < wait then
    redis.call('pexpireat', L, t + wait, 'GT')
    redis.call('pexpireat', H, t + wait, 'GT')
  end
else
  keepSem(H, L, Q, D, t, used, permits)
end
local first = redis.call('zrange', L, 0, 0, 'WITHSCORES')
local pttl = -2
if first[2] then
  pttl = math.max(tonumber(first[2]) - t, 1)
end
if grace > 0 then
  pttl = math.max(pttl, grace)
end
if head == entry then
  return {0, pttl, 1, joined}
end
return {0, pttl, 0, joined}
