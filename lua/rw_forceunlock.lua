-- rw_forceunlock.lua: delete every hold of a read-write lock, whoever holds it, and wake the
-- waiters. Waiting writers and the queue are left to their waiters.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] queue (see rw_acquire.lua), KEYS[4] channel
-- ARGV[1] 'fair' or 'plain'
-- Returns 1 when the lock was held, 0 when not. Raises WRONGTYPE, deleting nothing, when a
-- key has another type.
local H, L, Q, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
mustBeKind(H, 'rw', redis.call('hget', H, '\1k'))
local held = redis.call('zcard', L) > 0
if ARGV[1] == 'fair' then
  local head = redis.call('lindex', Q, 0)
  redis.call('del', H, L)
  if head and string.sub(head, 1, 2) == 'w:' then
    redis.call(PUBLISH, C, '@' .. head)
  elseif head then
    redis.call(PUBLISH, C, '*')
  end
else
  redis.call('del', H, L)
  redis.call(PUBLISH, C, '*')
end
if held then
  return 1
end
return 0
