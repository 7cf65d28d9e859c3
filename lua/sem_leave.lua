-- sem_leave.lua: remove a waiter that gives up from a semaphore's queue, and wake the new head.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] channel (as in
--         sem_acquire.lua)
-- ARGV[1] hold id of the waiter
-- Returns 1 when it was queued, 0 when not. Idempotent.
local H, L, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
mustBeKind(H, 'sem', redis.call('hget', H, '\1k'))
redis.call('llen', Q)
if not leaveQueue(Q, D, ARGV[1]) then
  return 0
end
local t = now()
local head = purgeQueue(Q, D, t)
if head then
  redis.call(PUBLISH, C, '@' .. head)
elseif redis.call('zcount', L, '(' .. t, '+inf') == 0 then
  redis.call('del', H, L, Q, D)
end
return 1
