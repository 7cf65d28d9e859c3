-- rw_release.lua: give back one read or write hold of an owner; a repeated request never
-- releases twice.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] waiting writers, KEYS[4] queue, KEYS[5] deadlines (as
--         in rw_acquire.lua)
-- KEYS[6] channel, KEYS[7] fencing counter (fair: for the grants it makes)
-- ARGV[1] owner id
-- ARGV[2] request id of this release (see lib.lua)
-- ARGV[3] 'r' or 'w'
-- ARGV[4] 'fair' or 'plain'
-- A partial release records its outcome; the owner's last hold deletes the owner's record (the
-- caller takes "nothing held" after a lost reply as its own release), and the lock's last hold
-- deletes the hash and the leases.
-- Wake-ups: plain: a writer's release publishes "*" (every waiting reader, and one other
-- waiter, of each client); the last holder's release publishes "0" (one waiter of each
-- client: a writer). Fair: when the lock frees up for the queue's head, it is granted to the
-- head (see grantRW).
-- Returns {remaining holds of that kind, clients woken, remaining holds of both kinds}; -1 as
-- the first element: the owner held none of that kind (nothing is written but lapsed holds).
local H, L, W, Q, D, C, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local owner, req, acc, fair = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == 'fair'
local field = acc .. ':' .. owner

-- Fast path: the owner's last hold is the lock's only one and (fair) nobody queues: the keys
-- go, as the full path below would leave them, and no grant needs the fencing counter. The
-- hash and the leases expire with the latest lease (see expireWith), so while the hash exists
-- a lone lease has not ended (to the millisecond that the keys' expiry has).
local got = redis.call('hmget', H, '\1k', field, marker(req, owner))
mustBeKind(H, 'rw', got[1])
local only = got[2] == '1' and not recorded(got[3], req) and redis.call('zrange', L, 0, 1)
if only and #only == 1 and only[1] == field and (not fair or redis.call('exists', Q, D) == 0) then
  redis.call('del', H, L)
  local woken = 0
  if not fair then
    woken = redis.call(PUBLISH, C, acc == 'w' and '*' or '0')
  end
  return {0, woken, 0}
end
redis.call('zcard', L)
if fair then
  redis.call('llen', Q)
  redis.call('zcard', D)
  if badCounter(redis.call('get', F)) then
    return redis.error_reply('ERR fencing counter is not an integer or out of range')
  end
end

local t = now()
dropLapsedRW(H, L, t)

local function total()
  local mine = redis.call('hmget', H, 'r:' .. owner, 'w:' .. owner)
  return tonumber(mine[1] or '0') + tonumber(mine[2] or '0')
end

local held = redis.call('hmget', H, field, marker(req, owner))
local n = recorded(held[2], req)
if n then
  return {n, 0, total()}
end
if not held[1] then
  return {-1, 0, total()}
end
if tonumber(held[1]) > 1 then
  local count = redis.call('hincrby', H, field, -1)
  record(H, owner, req, count)
  return {count, 0, total()}
end

redis.call('hdel', H, field, '\1g' .. field)
redis.call('zrem', L, field)
if acc == 'w' then
  redis.call('hdel', H, '\1w')
end
local left = total()
if left == 0 then
  redis.call('hdel', H, marker(req, owner))
else
  record(H, owner, req, 0)
end
local holders = redis.call('zcard', L)
expireWith(H, L, t, 0)

local woken = 0
if not fair then
  if acc == 'w' then
    woken = redis.call(PUBLISH, C, '*')
  elseif holders == 0 then
    woken = redis.call(PUBLISH, C, '0')
  end
  return {0, woken, left}
end
if acc == 'w' or holders == 0 then
  woken = grantRW(H, L, Q, D, C, F, t)
end
return {0, woken, left}
