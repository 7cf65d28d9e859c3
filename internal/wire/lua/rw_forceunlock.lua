-- rw_forceunlock.lua: delete every hold of a read-write lock, whoever holds it, and let the
-- waiters in: plain, wake them; fair, grant the lock to the queue's head (see grantRW).
-- Waiting writers and the queue keep their places.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] queue, KEYS[4] deadlines (see rw_acquire.lua),
-- KEYS[5] channel, KEYS[6] fencing counter
-- ARGV[1] 'fair' or 'plain'
-- Returns 1 when the lock was held, 0 when not. Raises WRONGTYPE, deleting nothing, when a
-- key has another type.
local H, L, Q, D, C, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local top = redis.call('hmget', H, FIELD_KIND, FIELD_LONE)
mustBeKind(H, 'rw', top[1])
local held = top[2] ~= false or redis.call('zcard', L) > 0 -- a lone hold, or the leases' (see leases.lua)
if ARGV[1] == 'fair' then
  redis.call('llen', Q)
  redis.call('zcard', D)
  if badCounter(redis.call('get', F)) then
    return redis.error_reply('ERR fencing counter is not an integer or out of range')
  end
  redis.call('del', H, L)
  grantRW(H, L, Q, D, C, F, now())
else
  redis.call('del', H, L)
  redis.call(PUBLISH, C, '*')
end
if held then
  return 1
end
return 0
