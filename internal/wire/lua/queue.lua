-- queue.lua: helpers of the kinds whose waiters queue (fair Mutex, election, RWMutex,
-- Semaphore), and of direct handoff: a release grants the lock to the queue's head itself and
-- tells it so in the wake-up, so the head returns without another round trip (a fair Mutex's
-- and an election's: mutex.lua's handOver).

-- purgeQueue removes the waiters of queue Q whose deadline in zset D passed by t, and returns
-- the head that remains (or false).
local function purgeQueue(Q, D, t)
  local dead = redis.call('zrangebyscore', D, '-inf', t)
  for i = 1, #dead do
    redis.call('lrem', Q, 0, dead[i])
  end
  if #dead > 0 then
    redis.call('zremrangebyscore', D, '-inf', t)
  end
  local head = redis.call('lindex', Q, 0)
  while head and not redis.call('zscore', D, head) do
    -- in the queue without a deadline (a key evicted or edited): dead
    redis.call('lpop', Q)
    head = redis.call('lindex', Q, 0)
  end
  return head
end

-- liveHead returns the head of queue Q whose deadline in zset D is later than t (or false),
-- dropping the dead heads before it (a head without a deadline is dead). Dead waiters further
-- back stay until they reach the head or an attempt purges them (purgeQueue): a release that
-- grants or wakes the head reads 2 keys, not the whole deadline set. When the queue is empty
-- D is read once all the same, so that a key of the wrong type raises before any write. first:
-- the queue's first entry, if the caller read it already (false: none).
local function liveHead(Q, D, t, first)
  local head = first
  if head == nil then
    head = redis.call('lindex', Q, 0)
  end
  if not head then
    redis.call('zcard', D)
    return false
  end
  while head do
    local s = redis.call('zscore', D, head)
    if s and tonumber(s) > t then
      return head
    end
    redis.call('lpop', Q)
    if s then
      redis.call('zrem', D, head)
    end
    head = redis.call('lindex', Q, 0)
  end
  return false
end

-- joinQueue puts entry at the end of queue Q with deadline t + wait in D, or refreshes its
-- deadline if it is queued already; it returns 1 if it put the entry there (joined anew), else
-- 0. The keys live at least wait more, never less than they did. freshD: the caller read D
-- empty (or missing) in this call, so the ZADD made it.
local function joinQueue(Q, D, entry, t, wait, freshD)
  local joined, freshQ = 0, false
  if redis.call('zadd', D, t + wait, entry) == 1 then
    freshQ = redis.call('rpush', Q, entry) == 1
    joined = 1
  end
  keepFor(Q, wait, freshQ)
  keepFor(D, wait, freshD)
  return joined
end

-- leaveQueue removes entry from queue Q and deadlines D; it reports whether it was there.
local function leaveQueue(Q, D, entry)
  redis.call('lrem', Q, 0, entry)
  return redis.call('zrem', D, entry) == 1
end

-- A queued waiter's entry is "<address>\0<request id>\0<claim ms>\0<extra>": where its wake-up
-- goes, the request a grant is recorded for, the lease a grant gives it (0: wake it, grant
-- nothing), and what its kind needs to know (a fair Mutex or RWMutex: '1' for a fencing token; a
-- Semaphore: its permits; an election's candidate: its value; a MultiLock's set: nothing, as it
-- is never granted). A labelled waiter's claim is followed by "\1<label>" (a label has no
-- control character); an unlabelled one's entry is as before. An entry without NULs is an
-- address alone (wake it only).
local function queueEntry(addr, req, claim, extra, label)
  if label and label ~= '' then
    claim = claim .. '\1' .. label
  end
  return addr .. '\0' .. req .. '\0' .. claim .. '\0' .. extra
end

-- splitEntry returns an entry's address, request id (nil for an address alone), claim (a
-- number), extra and label ('' for none).
local function splitEntry(e)
  local addr, req, claim, label, extra = string.match(e, '^(.-)%z(.-)%z(%d+)([^%z]*)%z(.*)$')
  if not addr then
    return e, nil, 0, '', ''
  end
  if graceLeft() > 0 then
    claim = 0 -- a restarted server grants nothing: the waiter is woken to try itself
  end
  return addr, req, tonumber(claim), extra, string.sub(label, 2)
end

-- grantMessage is the wake-up that tells the waiter at addr that request req was granted the
-- lock with fencing token tok and a lease of claim ms (from the moment the script ran). The
-- messages on a lock's channel, and how the client reads them: see ../message.go.
local function grantMessage(addr, req, tok, claim)
  -- (string.format: Lua writes a number of more than 14 digits in exponent form)
  return '@' .. addr .. '\0' .. req .. '\0' .. string.format('%d', tok) .. '\0' .. string.format('%d', claim)
end
