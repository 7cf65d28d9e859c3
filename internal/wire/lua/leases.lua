-- leases.lua: helpers of the kinds whose holds each have a lease (RWMutex, Semaphore). Their
-- scripts run lib.lua, queue.lua, this file, their kind's helpers (rw.lua, sem.lua) and their own
-- file.

-- These kinds keep their holds' leases in a sorted set, hold -> lease end in server ms, beside
-- the hash of counts; the keys' own expiry is only the latest
-- lease end, so that they vanish with the last hold.

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
  redis.call('pexpire', H, ms)
  if last[2] then
    redis.call('pexpire', L, ms)
  end
end
