-- leases.lua: helpers of the kinds whose holds each have a lease (RWMutex, Semaphore). Their
-- scripts run lib.lua, queue.lua, this file and their own file.

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

-- dropLapsedRW removes from a read-write lock's hash H the holds whose lease in L ended by t
-- (and the writer, if its write hold was one of them); it returns how many it removed. dead:
-- those holds, if the caller read them already (ZRANGEBYSCORE L -inf t).
local function dropLapsedRW(H, L, t, dead)
  if not dead then
    dead = lapsed(L, t)
  elseif #dead > 0 then
    redis.call('zremrangebyscore', L, '-inf', t)
  end
  for _, m in ipairs(dead) do
    redis.call('hdel', H, m, '\1g' .. m)
    if string.sub(m, 1, 2) == 'w:' then
      redis.call('hdel', H, '\1w')
    end
  end
  return #dead
end

-- dropLapsedSem removes from a semaphore's hash H the holds whose lease in L ended by t, and
-- returns the permits still held and how many holds lapsed. used: the hash's permits in use,
-- and dead: the holds whose lease ended (ZRANGEBYSCORE L -inf t), if the caller read them.
local function dropLapsedSem(H, L, t, used, dead)
  used = used or tonumber(redis.call('hget', H, '\1u') or '0')
  if not dead then
    dead = lapsed(L, t)
  elseif #dead > 0 then
    redis.call('zremrangebyscore', L, '-inf', t)
  end
  for _, d in ipairs(dead) do
    used = used - tonumber(redis.call('hget', H, d) or '0')
    redis.call('hdel', H, d)
  end
  return math.max(used, 0), #dead
end

-- keepSem stores a semaphore's permits in use (and its permit count, when given) and gives its
-- keys the expiry of the latest lease or waiter deadline, or deletes them all when nothing is
-- held and nobody waits.
local function keepSem(H, L, Q, D, t, used, permits)
  local last = redis.call('zrange', D, -1, -1, 'WITHSCORES')
  local floor = 0
  if last[2] then
    floor = tonumber(last[2]) - t
  end
  local lastLease = redis.call('zrange', L, -1, -1, 'WITHSCORES')
  if not lastLease[2] and floor <= 0 then
    redis.call('del', H, L, Q, D)
    return
  end
  if permits then
    redis.call('hset', H, '\1k', 'sem', '\1p', permits, '\1u', math.max(used, 0))
  else
    redis.call('hset', H, '\1k', 'sem', '\1u', math.max(used, 0))
  end
  expireWith(H, L, t, floor, lastLease)
end

-- grantPermits hands the permits that semaphore hash H has free at t (of permits; used are
-- held) to the live waiters at the head of queue Q (deadlines D), in order, while the head's
-- request fits: each is granted its hold, with a lease of its claim in leases zset L, and told
-- so on channel C (direct handoff, see queue.lua). A head that asked for no claim is woken to
-- take its permits itself. Returns the permits then held and the clients the messages reached.
-- head: the queue's live head (see liveHead), if the caller read it already. Once every permit
-- is held nothing fits (a request takes at least one), and the queue is not read.
local function grantPermits(H, L, Q, D, C, t, used, permits, head)
  local woken = 0
  if used >= permits then
    return used, woken
  end
  if head == nil then
    head = liveHead(Q, D, t)
  end
  while head do
    local id, req, claim, n = splitEntry(head)
    n = tonumber(n)
    if not n or used + n > permits then
      break
    end
    if not req or claim == 0 then
      return used, woken + redis.call(PUBLISH, C, '@' .. id)
    end
    used = used + n
    redis.call('hset', H, id, n)
    redis.call('zadd', L, t + claim, id)
    redis.call('lpop', Q)
    redis.call('zrem', D, head)
    woken = woken + redis.call(PUBLISH, C, grantMessage(id, req, 0, claim))
    if used >= permits then
      break
    end
    head = liveHead(Q, D, t)
  end
  return used, woken
end

-- grantRW lets the head of a fair read-write lock's queue Q (deadlines D) in, if the holders of
-- hash H (leases L) at t allow it: a writer head when nobody holds, the readers ahead of the
-- first queued writer when no writer holds. Each is granted its hold, with a lease of its
-- claim (never shortening one it has) and "\1g<r|w>:<owner>" naming the granted request, and
-- told so on channel C (direct handoff, see queue.lua); a writer takes a fencing token from
-- counter F if its entry asks for one (the caller checked F), a reader the counter as it is.
-- An entry that asked for no claim, or whose owner already holds that way (two calls of one
-- owner: one grant record per owner and access), is woken to take the lock itself. Returns the
-- clients the messages reached. known, if the caller knows them after dropping lapsed holds:
-- {writer = the writer field or false, held = whether any hold is left, head = the queue's
-- head once purged (see purgeQueue)}.
local function grantRW(H, L, Q, D, C, F, t, known)
  local head
  if known then
    head = known.head
  else
    head = purgeQueue(Q, D, t)
  end
  if not head then
    return 0
  end
  local writer, held
  if known then
    writer, held = known.writer, known.held
  else
    writer = redis.call('hget', H, '\1w')
  end
  if writer then
    return 0
  end
  local function give(e, field, req, claim, tok, w)
    redis.call('hincrby', H, field, 1)
    if w then
      redis.call('hset', H, '\1g' .. field, req, '\1k', 'rw', '\1w', w)
    else
      redis.call('hset', H, '\1g' .. field, req, '\1k', 'rw')
    end
    redis.call('zadd', L, 'GT', t + claim, field)
    redis.call('lrem', Q, 1, e)
    redis.call('zrem', D, e)
    return redis.call(PUBLISH, C, grantMessage(field, req, tok, claim))
  end
  if string.sub(head, 1, 2) == 'w:' then
    if held == nil then
      held = redis.call('zcount', L, '(' .. t, '+inf') > 0
    end
    if held then
      return 0
    end
    local field, req, claim, fenced = splitEntry(head)
    if not req or claim == 0 then
      return redis.call(PUBLISH, C, '@' .. field)
    end
    local woken = give(head, field, req, claim, fence(fenced == '1' and F, true), string.sub(field, 3))
    expireWith(H, L, t, 0)
    return woken
  end
  local woken = 0
  for _, e in ipairs(redis.call('lrange', Q, 0, -1)) do
    if string.sub(e, 1, 2) == 'w:' then
      break
    end
    local field, req, claim, fenced = splitEntry(e)
    if not req or claim == 0 or redis.call('hexists', H, field) == 1 then
      -- Its owner holds already (granted earlier in this batch to another call of the same
      -- owner, which the "\1g" record names): woken, it re-enters, and its entry leaves then.
      woken = woken + redis.call(PUBLISH, C, '@' .. field)
    else
      woken = woken + give(e, field, req, claim, fence(fenced == '1' and F, false))
    end
  end
  expireWith(H, L, t, 0)
  return woken
end
