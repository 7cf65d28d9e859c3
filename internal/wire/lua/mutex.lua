-- mutex.lua: the logic of one Mutex, plain or fair, shared by the Mutex's scripts, a
-- MultiLock's group scripts (multi_*.lua: several Mutexes at once) and an election's (el_*.lua:
-- a fair Mutex whose hold is a term). It comes after the kind's hooks (kind_mutex.lua or
-- kind_election.lua: KIND, needsToken, newToken, holdFields, announce), which its functions
-- call, and after queue.lua.

-- readHold reads owner's hold of hash H for request req in one HMGET, and raises WRONGTYPE if
-- H holds another kind. It returns the fields read (count, req's record, kind, grant) and the
-- count req took, or nil when req has not run. An owner made for the request (its id is the
-- request id) is held by nobody else and writes no record: any hold of it is req's.
local function readHold(H, owner, req)
  local held = redis.call('hmget', H, owner, marker(req, owner), FIELD_KIND, FIELD_GRANT)
  local n
  if owner == req and held[1] then
    n = tonumber(held[1])
  else
    n = recorded(held[2], req)
  end
  mustBeKind(H, KIND, held[3])
  return held, n
end

-- counterBad reads fencing counter F if a new hold whose queue entry has extra extra takes a
-- token (needsToken), and returns an error reply if the counter is bad (see badCounter), else
-- nil; and the value read (false: none). A counter at 2^53 (MAX_TOKEN) is not bad, but gives no
-- new token: an attempt fails (counterFull), a release wakes the head instead (handOver).
local function counterBad(F, extra)
  local cur = needsToken(extra) and redis.call('get', F)
  if cur and badCounter(cur) then
    return redis.error_reply('ERR fencing counter is not an integer or out of range'), cur
  end
  return nil, cur
end

-- takeHold makes owner the holder of free lock H for request req (recorded, unless the owner
-- was made for it), with token tok, a lease of lease ms and the fields its kind writes, and
-- tells observers (announce). extra: what the kind keeps in the hold's queue entry.
local function takeHold(H, owner, req, lease, tok, extra)
  if owner == req then
    redis.call('hset', H, owner, 1, holdFields(extra, tok))
  else
    redis.call('hset', H, owner, 1, marker(req, owner), req .. ':1', holdFields(extra, tok))
  end
  redis.call('pexpire', H, lease)
  announce(tok, lease, extra)
end

-- extend makes lock H's lease at least ms from now: a lease is never shortened (another hold
-- of the owner, taken with a longer lease, keeps its own; see keepFor).
local function extend(H, ms)
  keepFor(H, ms, false)
end

-- reenterHold counts one more hold of owner on H for request req (recorded), extends the lease
-- to at least lease ms (see extend) and returns the owner's count.
local function reenterHold(H, owner, req, lease)
  local count = redis.call('hincrby', H, owner, 1)
  record(H, owner, req, count)
  extend(H, lease)
  return count
end

-- plainRead reads plain Mutex H for owner's attempt req in mode (see acquire.lua), writing
-- nothing, and returns what the attempt may do:
--   'free': take it;
--   'ran', n: req ran already and took the hold, the owner's count n then;
--   'none': mode is not 'take' and the lock is free, or mode is 'resolve' and req has not run;
--   'held': the owner holds it: re-enter;
--   'wait', pttl: another owner holds it for pttl ms (-1: no expiry), or it is free and a
--   restart grace has pttl ms to run (see graceLeft).
-- A hash of another kind raises WRONGTYPE. known: H's PTTL, if the caller read it (a fast path).
-- Mode 'takenew' is 'take' for an owner made for request req that cannot hold H (see
-- acquire.lua): a lock that is there is another owner's, and the hash is not read.
local function plainRead(H, owner, req, mode, known)
  -- PTTL answers both questions a failed attempt asks: is the lock there (-2: no) and how long
  -- its lease runs; it type-checks nothing, so the HMGET below raises WRONGTYPE for a non-hash.
  local pttl = known or redis.call('pttl', H)
  if pttl == -2 then
    if mode ~= 'take' and mode ~= 'takenew' then
      return 'none'
    end
    local grace = graceLeft()
    if grace > 0 then
      return 'wait', grace -- a restarted server: look again when its grace has passed
    end
    return 'free'
  end
  if mode == 'takenew' then
    return 'wait', pttl
  end
  local held, n = readHold(H, owner, req)
  if n then
    return 'ran', n
  end
  if mode == 'resolve' then
    return 'none'
  end
  if held[1] then
    return 'held'
  end
  return 'wait', pttl
end

-- fairRead reads fair lock H (queue Q, fencing counter F) for owner's attempt req in mode,
-- writing nothing; extra is what the caller's queue entry keeps (needsToken reads it). It
-- returns what the attempt may do:
--   'free', cur: no hash and no queue (one EXISTS): free, and nobody waits;
--   'grant', count: a release granted the lock to req (see handOver);
--   'ran', n, 'none', 'held': as plainRead's;
--   'wait', pttl, head, cur: the queue decides: pttl is the holder's (-2: free, -1: no expiry,
--   or a restart grace's, as if held until it has passed), head the queue's head (false: none)
--   before dead waiters are purged (see purgeFair);
--   'bad', error reply: the counter cannot give a new hold its token;
--   mode 'check' only: 'none' when a take could succeed or re-enter (free, or held by the
--   owner), else 'check', pttl, head (the queue's head, false: none), read as 'wait' reads them.
-- cur is the fencing counter as read (false: none or not read), for newToken. A key of the
-- wrong type raises. known: EXISTS H Q, if the caller read it (a fast path).
local function fairRead(H, Q, F, owner, req, extra, mode, known)
  -- Fast path: no hash and no queue (one EXISTS for both): free, and nobody waits (and no
  -- restart grace holds new grants back: see graceLeft).
  if (known or redis.call('exists', H, Q)) == 0 and graceLeft() == 0 then
    if mode == 'resolve' or mode == 'check' then
      return 'none'
    end
    local bad, cur = counterBad(F, extra)
    if bad then
      return 'bad', bad
    elseif cur == MAX_TOKEN then
      return 'bad', counterFull()
    end
    return 'free', cur
  end
  -- (Should the hash not exist, its fields read nil and PTTL -2: free, as above.) One HMGET
  -- reads the owner's count, its replay record, the kind and the grant record.
  local held, n = readHold(H, owner, req)
  if held[1] and held[4] == req then
    return 'grant', tonumber(held[1])
  end
  if n then
    return 'ran', n
  end
  if mode == 'resolve' then
    return 'none'
  end
  if held[1] then
    return mode == 'check' and 'none' or 'held'
  end
  local pttl = redis.call('pttl', H)
  if mode == 'check' then
    if pttl == -2 then
      return 'none' -- free: a take may purge dead waiters and take it
    end
    return 'check', pttl, redis.call('lindex', Q, 0)
  end
  -- Check the counter now: purging dead waiters writes before a new hold's token would.
  -- (From here on the call takes a new hold or waits for one: at 2^53 it can have no token.)
  local bad, cur = counterBad(F, extra)
  if bad then
    return 'bad', bad
  elseif cur == MAX_TOKEN then
    return 'bad', counterFull()
  end
  if pttl == -2 and graceLeft() > 0 then
    pttl = graceLeft() -- a restarted server: as if held until its grace has passed
  end
  return 'wait', pttl, redis.call('lindex', Q, 0), cur
end

-- purgeFair removes from queue Q the waiters whose deadline in zset D passed by t, wherever
-- they stand; if the queue and the deadlines disagree (a key evicted or edited), it rebuilds
-- the queue from the owners that have a deadline (living wait ms). head is the queue's head as
-- the caller read it. It returns the head after that (false: none) and how many waiters D
-- keeps.
local function purgeFair(Q, D, t, wait, head)
  local dead = redis.call('zrangebyscore', D, '-inf', t)
  for i = 1, #dead do
    redis.call('lrem', Q, 0, dead[i])
    redis.call('zrem', D, dead[i])
  end
  local queued = redis.call('zcard', D)
  if redis.call('llen', Q) ~= queued then
    -- One key lost entries the other has: keep the queued owners that have a deadline, once
    -- each and in queue order, then the owners that have a deadline but no place, by deadline.
    local seen, keep = {}, {}
    for _, o in ipairs(redis.call('lrange', Q, 0, -1)) do
      if not seen[o] and redis.call('zscore', D, o) then
        seen[o] = true
        keep[#keep + 1] = o
      end
    end
    for _, o in ipairs(redis.call('zrange', D, 0, -1)) do
      if not seen[o] then
        seen[o] = true
        keep[#keep + 1] = o
      end
    end
    redis.call('del', Q)
    for i = 1, #keep, 1000 do
      redis.call('rpush', Q, unpack(keep, i, math.min(i + 999, #keep)))
    end
    if #keep > 0 then
      keepFor(Q, wait, true) -- made anew above
    end
    dead = {1}
  end
  if #dead > 0 then
    head = redis.call('lindex', Q, 0)
  end
  return head, queued
end

-- A fair attempt is a table: the lock's hash H, queue Q, deadlines D and fencing counter F, the
-- owner, the request req, the caller's queue entry and its extra, and the lease in ms.

-- takeFair makes attempt a's owner the holder of its free fair lock, popping its entry from
-- the head of the queue when pop (it heads it), and returns the new hold's token (see
-- newToken: t is the server's clock if read, cur the counter as fairRead read it).
local function takeFair(a, pop, t, cur)
  local tok = newToken(a.F, a.extra, t, cur)
  if pop then
    redis.call('lpop', a.Q)
    redis.call('zrem', a.D, a.entry)
  end
  takeHold(a.H, a.owner, a.req, a.lease, tok, a.extra)
  return tok
end

-- queueFair ends attempt a that fairRead left to the queue ('wait', pttl, head, cur): the lock
-- goes to the caller only when it is free and the caller heads the queue, once purged (see
-- purgeFair), or nobody waits: nobody jumps the queue. Otherwise the caller joins the queue
-- (or refreshes its deadline there) when join, its place lasting wait ms. Returns {1, 1, token}
-- when taken, else {0, pttl, head, joined}: head 1 when the caller heads the queue, joined 1
-- when this call put its entry in the queue (it was not there: first call, or its place was
-- granted or lost meanwhile).
local function queueFair(a, wait, join, pttl, head, cur)
  if pttl == -2 and not head then
    return {1, 1, takeFair(a, false, nil, cur)} -- free, and nobody waits
  end
  local t = now()
  local queued
  head, queued = purgeFair(a.Q, a.D, t, wait, head)
  if pttl == -2 and (not head or head == a.entry) then
    return {1, 1, takeFair(a, head ~= false and head ~= nil, t, cur)}
  end
  local joined = 0
  if join then
    joined = joinQueue(a.Q, a.D, a.entry, t, wait, queued == 0)
    head = head or a.entry
  end
  if head == a.entry then
    return {0, pttl, 1, joined}
  end
  return {0, pttl, 0, joined}
end

-- handOver frees fair lock H for the queue Q (deadlines D) at server time t: it drops the dead
-- heads (see liveHead) and gives the lock to the live head, with a token from counter F if its
-- entry needs one (newToken), a lease of its claim and the fields its kind writes, tells it so
-- on channel C and tells observers (announce), labelled as its entry is (labelHold); a head that asked for no claim, or for a token
-- from a counter at 2^53 (whose own attempt then fails), is only woken. A bad fencing counter
-- returns an error reply before H is touched. Returns the clients the message on C reached (or
-- that error), and whether it granted the lock.
local function handOver(H, Q, D, C, F, t)
  local head = liveHead(Q, D, t)
  if not head then
    redis.call('del', H)
    return 0, false
  end
  local owner, req, claim, extra, label = splitEntry(head)
  if not req or claim == 0 then
    redis.call('del', H)
    return redis.call(PUBLISH, C, '@' .. owner), false
  end
  local bad, cur = counterBad(F, extra)
  if bad then
    return bad, false
  end
  redis.call('del', H)
  if cur == MAX_TOKEN then
    return redis.call(PUBLISH, C, '@' .. owner), false
  end
  local tok = newToken(F, extra, t, cur)
  redis.call('hset', H, owner, 1, FIELD_GRANT, req, holdFields(extra, tok))
  redis.call('pexpire', H, claim)
  labelHold(H, owner, label)
  redis.call('lpop', Q)
  redis.call('zrem', D, head)
  local n = redis.call(PUBLISH, C, grantMessage(owner, req, tok, claim))
  announce(tok, claim, extra)
  return n, true
end

-- freeFair frees fair lock H whose last hold went: deleted when nobody waits (no queue Q nor
-- deadlines D: nobody is told), else handed over (handOver, channel C, counter F). It returns
-- what handOver does. known: EXISTS Q D, if the caller read it (a fast path).
local function freeFair(H, C, Q, D, F, known)
  if (known or redis.call('exists', Q, D)) == 0 then
    -- nobody waits (the usual case): the lock frees up, and nobody is told
    redis.call('del', H)
    return 0, false
  end
  -- (handOver reads the queue and the deadlines before it writes: see liveHead)
  return handOver(H, Q, D, C, F, now())
end

-- releaseRead reads owner's hold of H for release request req, writing nothing, and raises
-- WRONGTYPE if H holds another kind: it returns the owner's hold count (0: none) and the count
-- req left if it ran already (a repeat), else nil. known: that HMGET's reply, if the caller read
-- it (a fast path: HMGET H owner marker kind).
local function releaseRead(H, owner, req, known)
  local held = known or redis.call('hmget', H, owner, marker(req, owner), FIELD_KIND)
  mustBeKind(H, KIND, held[3])
  return tonumber(held[1] or '0'), recorded(held[2], req)
end

-- dropHold gives back one of owner's holds of H that are not its last, recording the count
-- left for release request req, and returns that count.
local function dropHold(H, owner, req)
  local count = redis.call('hincrby', H, owner, -1)
  redis.call('hset', H, marker(req, owner), req .. ':' .. count)
  return count
end

-- releaseHold gives back one hold of owner on hash H under release request req, unless it is
-- the owner's last: it returns the reply ({count left, 0}; {-1, 0} when the owner holds
-- nothing; a repeated request its recorded count), or nil when the last hold must go, which
-- the caller does (and nothing is written then). known: as releaseRead's.
local function releaseHold(H, owner, req, known)
  local count, n = releaseRead(H, owner, req, known)
  if n then
    return {n, 0}
  end
  if count == 0 then
    return {-1, 0}
  end
  if count > 1 then
    return {dropHold(H, owner, req), 0}
  end
  return nil
end

-- member returns member i of a MultiLock's group script (multi_*.lua) as a fair attempt (see
-- takeFair) of owner's request req with queue entry entry: its keys, KEYS[5i-4] to KEYS[5i] (the
-- hash, channel, queue, deadlines and fencing counter), and from spec, "<lease ms>:<flags>",
-- its lease, fair ('f' in flags) and extra ('1' with 't' in flags: fencing tokens, else '0').
local function member(i, spec, owner, req, entry)
  local lease, flags = string.match(spec, '^(%d*):(%a*)$')
  local k = 5 * i - 4
  return {H = KEYS[k], C = KEYS[k + 1], Q = KEYS[k + 2], D = KEYS[k + 3], F = KEYS[k + 4],
    owner = owner, req = req, entry = entry, lease = lease,
    fair = string.find(flags, 'f', 1, true) ~= nil,
    extra = string.find(flags, 't', 1, true) and '1' or '0'}
end
