-- leases.lua: helpers of the kinds whose holds each have a lease (RWMutex, Semaphore). Their
-- scripts run lib.lua, queue.lua, this file, their kind's helpers (rw.lua, sem.lua) and their own
-- file.

-- These kinds keep their holds' leases in a sorted set, hold -> lease end in server ms, beside
-- the hash of counts; the keys' own expiry is only the latest
-- lease end, so that they vanish with the last hold.
-- Except a lone hold: one taken when none of the lock's keys existed keeps its lease in the
-- hash's expiry alone, its name in FIELD_LONE, and the zset does not exist (an uncontended
-- hold writes 2 keys' worth of calls less). Scripts that read leases read both layouts; those
-- that change holds or waiters move the lone hold into the zset first (spread).

-- loneEnd returns the lease end (server ms) of hash H's lone hold: the hash's PEXPIRETIME, nil
-- when it has no expiry. (Not the caller's TIME plus a PTTL: PTTL reads the clock again, maybe a
-- millisecond later, and the lease would end that much early.)
local function loneEnd(H)
  local at = redis.call('pexpiretime', H)
  if at > 0 then
    return at
  end
  return nil
end

-- spread moves the lone hold lone (FIELD_LONE of hash H, as the caller read it; nil or false:
-- none) into leases zset L at t, its lease end the hash's expiry (see loneEnd), so that the
-- caller finds every hold there. A lease that ends by t is moved too, for the caller or the next
-- script to drop as lapsed. L must outlive H (else the hold is left in H without a lease,
-- holding its permits for as long as H lives): it expires with H, but no sooner than a second
-- after t, since an expiry that has passed when PEXPIREAT looks at the clock deletes the key at
-- once (a relative PEXPIRE of 1ms did whenever a millisecond began between its two readings of
-- the clock). Callers that change the keys' expiry then set L's exactly (expireWith). A hash
-- without expiry (edited) keeps the hold without a lease, as the zset layout does a hold it has
-- no entry for.
local function spread(H, L, t, lone)
  if not lone then
    return
  end
  local at = loneEnd(H)
  redis.call('hdel', H, FIELD_LONE)
  if at then
    redis.call('zadd', L, at, lone)
    redis.call('pexpireat', L, math.max(at, t + 1000))
  end
end

-- lapsed removes from leases zset L the holds whose lease ended by t and returns them.
local function lapsed(L, t)
  local dead = redis.call('zrangebyscore', L, '-inf', t)
  if #dead > 0 then
    redis.call('zremrangebyscore', L, '-inf', t)
  end
  return dead
end

-- expireWith gives hash H and leases zset L the expiry of the latest lease in L, or at least
-- floor ms (waiters that keep H alive; 0: none), or deletes both when nothing is left. last:
-- L's latest lease as ZRANGE L -1 -1 WITHSCORES returns it, if the caller read it already.
-- Both get the same instant (PEXPIREAT, not PEXPIRE: that reads the clock twice, and a key
-- whose new expiry has passed by the second reading is deleted at once), L first: should the
-- instant have passed by then, L is deleted and so is H after it, never H left without L.
local function expireWith(H, L, t, floor, last)
  last = last or redis.call('zrange', L, -1, -1, 'WITHSCORES')
  local ms = floor
  if last[2] then
    ms = math.max(ms, tonumber(last[2]) - t)
  end
  if ms <= 0 then
    redis.call('del', H, L)
    return
  end
  if last[2] then
    redis.call('pexpireat', L, t + ms)
  end
  redis.call('pexpireat', H, t + ms)
end
