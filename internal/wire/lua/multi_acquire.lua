-- multi_acquire.lua: one attempt of a MultiLock's set to take a group of its members, all or
-- nothing: Mutexes (plain or fair) whose keys share one hash slot, so no other client ever sees
-- some of them taken by the set and the others not. Each member is found free, held by the
-- set's owner (re-entered), or blocked by the logic of acquire.lua (a plain member) or
-- fair_acquire.lua (a fair one), shared in mutex.lua; a fair member is free for the set only
-- when its live queue is empty or headed by the set. When one blocks, no hold changes, and the
-- set holds a place in at most one queue of the group: that of the first member that blocks,
-- if it is fair (joined or refreshed with ARGV[5] 'wait'). It leaves every other place it had
-- in the group, handing a member it headed and left free on to the next live waiter (handOver
-- in mutex.lua, as fair_leave.lua does). So a set never makes anyone wait for a member it is
-- not itself waiting for: it cannot close a cycle with a single holder that takes members in
-- the global order, nor with another set. Its entry asks for no claim: a release only wakes the
-- set (granting one member would make it hold part of a group), and its next attempt takes
-- every member itself.
-- KEYS[5i-4] lock hash of member i
-- KEYS[5i-3] channel of member i
-- KEYS[5i-2] queue of member i (a fair member's; a plain member's is not touched)
-- KEYS[5i-1] deadlines of member i (likewise)
-- KEYS[5i]   fencing counter of member i (touched only with 't' in its flags)
-- ARGV[1] owner id
-- ARGV[2] request id (first 12 bytes: the client): every member's take or re-entry records it
--         (see readHold in mutex.lua), so the same request sent again (after a lost reply)
--         finds it and takes nothing more; the set's queue entries are owner, request id, claim
--         0 and nothing (see queue.lua)
-- ARGV[3] mode: 'take' to take or wait; 'resolve' changes nothing and reports whether the
--         request already ran (acquired) or not ({0, 0, -2, 0})
-- ARGV[4] FairWaitTimeout in milliseconds: the set's deadline in a queue is its last call plus
--         this
-- ARGV[5] 'wait' to join (or refresh the set's place in) the queue of the first member that
--         blocks, if it is fair; 'try' never to join
-- ARGV[6] label of the holds and of the wait ('' for none): see labelHold in lib.lua (each
--         member's hold is labelled), and queueEntry in queue.lua
-- ARGV[i+6] member i: "<lease ms>:<flags>", flags 'f' for a fair member and 't' for fencing
--         tokens (see member in mutex.lua)
-- Returns {1, count 1, token 1, ..., count n, token n} when every member was taken or
-- re-entered (a new hold's lease is its member's; a re-entry's lease is extended, never
-- shortened; a re-entry keeps the hold's token), or when the request ran already (its leases
-- extended likewise, but in 'resolve' mode; a member whose hold has gone since reads count 0,
-- token 0); or {0, i, pttl, head} when member i, the first that blocks, keeps the set out: pttl
-- is its holder's lease left (-1: no expiry; -2: free but another waiter is ahead of the set;
-- or the restart grace left, see graceLeft), head 1 when the set heads member i's queue.
-- Everything is read before a hold is written: a lock of another kind, a key of the wrong type
-- or a bad fencing counter raises, or returns an error, with no hold changed (dead waiters
-- purged from a queue meanwhile stay purged).
local owner, req, mode = ARGV[1], ARGV[2], ARGV[3]
local wait, join, label = tonumber(ARGV[4]), ARGV[5] == 'wait', ARGV[6]
local entry = queueEntry(owner, req, 0, '', label)
local ms, ran = {}, false

-- Every member's hold, replay record and lock, read (see plainRead and fairRead in mutex.lua).
for i = 1, #ARGV - 6 do
  local m = member(i, ARGV[i + 6], owner, req, entry)
  ms[i] = m
  if m.fair then
    m.what, m.x, m.head = fairRead(m.H, m.Q, m.F, owner, req, m.extra, mode)
  else
    m.what, m.x = plainRead(m.H, owner, req, mode)
    if m.what == 'free' then
      local cur
      m.x, cur = counterBad(m.F, m.extra)
      if not m.x and cur == MAX_TOKEN then
        m.x = counterFull() -- no exact token is left
      end
      if m.x then
        m.what = 'bad'
      end
    end
  end
  if m.what == 'bad' then
    return m.x
  elseif m.what == 'grant' then
    m.what = 'ran' -- (never: a set asks for no grant)
  end
  ran = ran or m.what == 'ran'
end

if ran or mode == 'resolve' then
  if not ran then
    return {0, 0, -2, 0}
  end
  local out = {1}
  for i, m in ipairs(ms) do
    out[2 * i], out[2 * i + 1] = 0, 0
    if m.what == 'ran' then
      out[2 * i], out[2 * i + 1] = m.x, fence(m.extra == '1' and m.F, false)
      if mode ~= 'resolve' then
        extend(m.H, m.lease)
      end
    end
  end
  return out
end

-- The first member that keeps the set out, in the group's order. A fair member that is free but
-- has a queue is free for the set when its live queue (once purged, see purgeFair) is empty or
-- headed by the set (as in queueFair, mutex.lua). The members after it are not looked at.
local t, blocked
for i, m in ipairs(ms) do
  if m.fair and m.what == 'wait' and m.x == -2 then
    local queued
    t = t or now()
    m.head, queued = purgeFair(m.Q, m.D, t, wait, m.head)
    m.fresh, m.purged = queued == 0, true
    if not m.head or m.head == entry then
      m.what, m.pop = 'free', m.head == entry
    end
  end
  if m.what == 'wait' then
    blocked = i
    break
  end
end

if blocked then
  local b, head = ms[blocked], 0
  -- The set's other places in the group, read before anything is written: each is left, and a
  -- member left free goes to its next live waiter.
  local places = {}
  for i, m in ipairs(ms) do
    if m.fair and i ~= blocked and redis.call('zscore', m.D, entry) then
      redis.call('llen', m.Q)
      m.free = redis.call('exists', m.H) == 0
      places[#places + 1] = m
    end
  end
  if b.fair and join then
    t = t or now()
    if not b.purged then
      local queued
      b.head, queued = purgeFair(b.Q, b.D, t, wait, b.head)
      b.fresh = queued == 0
    end
    joinQueue(b.Q, b.D, entry, t, wait, b.fresh)
    b.head = b.head or entry
  end
  if b.fair and b.head == entry then
    head = 1
  end
  for _, m in ipairs(places) do
    leaveQueue(m.Q, m.D, entry)
    if m.free then
      t = t or now()
      handOver(m.H, m.Q, m.D, m.C, m.F, t)
    end
  end
  return {0, blocked, b.x, head}
end

local out = {1}
for i, m in ipairs(ms) do
  if m.what ~= 'free' then
    -- (read before anything is written: a bad counter raises, see fence)
    out[2 * i + 1] = fence(m.extra == '1' and m.F, false)
  end
end
for i, m in ipairs(ms) do
  if m.what == 'free' then
    out[2 * i], out[2 * i + 1] = 1, takeFair(m, m.pop, t)
    labelHold(m.H, owner, label)
  else -- 'held'
    out[2 * i] = reenterHold(m.H, owner, req, m.lease)
    labelHold(m.H, owner, label)
    if m.fair and redis.call('zscore', m.D, entry) then
      leaveQueue(m.Q, m.D, entry) -- queued before the owner took it elsewhere
    end
  end
end
return out
