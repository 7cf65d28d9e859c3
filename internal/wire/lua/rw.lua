-- rw.lua: helpers of the RWMutex scripts (rw_*.lua but rw_inspect.lua), which run lib.lua,
-- queue.lua, leases.lua, this file and their own file.

-- writerMember is a plain RWMutex's waiting writer's member of the waiting writers: its owner,
-- and its label after a \1 if it has one (see labelHold).
local function writerMember(owner, label)
  if label and label ~= '' then
    return owner .. '\1' .. label
  end
  return owner
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
    redis.call('hdel', H, m, FIELD_GRANT .. m, labels(m))
    if string.sub(m, 1, 2) == 'w:' then
      redis.call('hdel', H, FIELD_WRITER)
    end
  end
  return #dead
end

-- grantRW lets the head of a fair read-write lock's queue Q (deadlines D) in, if the holders of
-- hash H (leases L) at t allow it: a writer head when nobody holds, the readers ahead of the
-- first queued writer when no writer holds. Each is granted its hold, with a lease of its
-- claim (never shortening one it has) and "\1g<r|w>:<owner>" naming the granted request, and
-- told so on channel C (direct handoff, see queue.lua); a writer takes a fencing token from
-- counter F if its entry asks for one (the caller checked F), a reader the counter as it is;
-- a labelled entry's hold is labelled (labelHold).
-- An entry that asked for no claim, or whose owner already holds that way (two calls of one
-- owner: one grant record per owner and access), or a writer that asked for a token when the
-- counter reached 2^53, is woken to take the lock itself. Returns the
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
    writer = redis.call('hget', H, FIELD_WRITER)
  end
  if writer then
    return 0
  end
  local function give(e, field, req, claim, label, tok, w)
    redis.call('hincrby', H, field, 1)
    labelHold(H, field, label)
    if w then
      redis.call('hset', H, FIELD_GRANT .. field, req, FIELD_KIND, 'rw', FIELD_WRITER, w)
    else
      redis.call('hset', H, FIELD_GRANT .. field, req, FIELD_KIND, 'rw')
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
    local field, req, claim, fenced, label = splitEntry(head)
    if not req or claim == 0 or (fenced == '1' and redis.call('get', F) == MAX_TOKEN) then
      -- (at 2^53 no exact token is left: woken, its own attempt fails)
      return redis.call(PUBLISH, C, '@' .. field)
    end
    local woken = give(head, field, req, claim, label, fence(fenced == '1' and F, true), string.sub(field, 3))
    expireWith(H, L, t, 0)
    return woken
  end
  local woken = 0
  for _, e in ipairs(redis.call('lrange', Q, 0, -1)) do
    if string.sub(e, 1, 2) == 'w:' then
      break
    end
    local field, req, claim, fenced, label = splitEntry(e)
    if not req or claim == 0 or redis.call('hexists', H, field) == 1 then
      -- Its owner holds already (granted earlier in this batch to another call of the same
      -- owner, which the "\1g" record names): woken, it re-enters, and its entry leaves then.
      woken = woken + redis.call(PUBLISH, C, '@' .. field)
    else
      woken = woken + give(e, field, req, claim, label, fence(fenced == '1' and F, false))
    end
  end
  expireWith(H, L, t, 0)
  return woken
end
