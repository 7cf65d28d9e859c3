-- sem.lua: helpers of the Semaphore scripts (sem_*.lua but sem_inspect.lua), which run
-- lib.lua, queue.lua, leases.lua, this file and their own file.

-- dropLapsedSem removes from a semaphore's hash H the holds whose lease in L ended by t, and
-- returns the permits still held and how many holds lapsed. used: the hash's permits in use,
-- and dead: the holds whose lease ended (ZRANGEBYSCORE L -inf t), if the caller read them.
local function dropLapsedSem(H, L, t, used, dead)
  used = used or tonumber(redis.call('hget', H, FIELD_USED) or '0')
  if not dead then
    dead = lapsed(L, t)
  elseif #dead > 0 then
    redis.call('zremrangebyscore', L, '-inf', t)
  end
  for _, d in ipairs(dead) do
    used = used - tonumber(redis.call('hget', H, d) or '0')
    redis.call('hdel', H, d, labels(d))
  end
  return math.max(used, 0), #dead
end

-- keepSem stores a semaphore's permits in use (and its permit count, when given), and the
-- holds granted (held: hold id, permits, ... as grantPermits leaves them; nil: none), and gives
-- its keys the expiry of the latest lease or waiter deadline, or deletes them all when nothing
-- is held and nobody waits.
local function keepSem(H, L, Q, D, t, used, permits, held)
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
  local set = {'hset', H, FIELD_KIND, 'sem', FIELD_USED, math.max(used, 0)}
  if permits then
    set[#set + 1], set[#set + 2] = FIELD_PERMITS, permits
  end
  for _, x in ipairs(held or {}) do
    set[#set + 1] = x
  end
  redis.call(unpack(set))
  expireWith(H, L, t, floor, lastLease)
end

-- grantPermits hands the permits that semaphore hash H has free at t (of permits; used are
-- held) to the live waiters at the head of queue Q (deadlines D), in order, while the head's
-- request fits: each is granted its hold, with a lease of its claim in leases zset L, and told
-- so on channel C (direct handoff, see queue.lua). A head that asked for no claim is woken to
-- take its permits itself. Returns the permits then held and the clients the messages reached.
-- head: the queue's live head (see liveHead), if the caller read it already. Once every permit
-- is held nothing fits (a request takes at least one), and the queue is not read. The granted
-- holds' fields are left to the caller's keepSem, in the list it returns third (one HSET).
local function grantPermits(H, L, Q, D, C, t, used, permits, head)
  local woken, held = 0, {}
  if used >= permits then
    return used, woken, held
  end
  if head == nil then
    head = liveHead(Q, D, t)
  end
  while head do
    local id, req, claim, n, label = splitEntry(head)
    n = tonumber(n)
    if not n or n > permits - used then -- (not used + n: a sum past 2^53 would round)
      break
    end
    if not req or claim == 0 then
      return used, woken + redis.call(PUBLISH, C, '@' .. id), held
    end
    used = used + n
    held[#held + 1], held[#held + 2] = id, n
    if label ~= '' then -- labelled as its entry is (see labelHold: in keepSem's HSET)
      local l, since = labels(id)
      held[#held + 1], held[#held + 2], held[#held + 3], held[#held + 4] = l, label, since, t
    end
    redis.call('zadd', L, t + claim, id)
    redis.call('lpop', Q)
    redis.call('zrem', D, head)
    woken = woken + redis.call(PUBLISH, C, grantMessage(id, req, 0, claim))
    if used >= permits then
      break
    end
    head = liveHead(Q, D, t)
  end
  return used, woken, held
end
