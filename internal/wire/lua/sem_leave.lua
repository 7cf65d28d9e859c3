-- sem_leave.lua: remove a waiter that gives up from a semaphore's queue, give back a hold a
-- release granted it that it never learned of, and grant the permits free to the waiters next
-- in line (see grantPermits).
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] channel (as in
--         sem_acquire.lua)
-- ARGV[1] hold id of the waiter, ARGV[2] its claim, ARGV[3] its permits, ARGV[4] its label
--         (optional) (they make its entry)
-- Returns 1 when it was queued or granted, 0 when not. Idempotent.
local H, L, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local got = redis.call('hmget', H, FIELD_KIND, FIELD_PERMITS, id, FIELD_LONE)
mustBeKind(H, 'sem', got[1])
redis.call('llen', Q)
redis.call('zcard', D)
local removed = leaveQueue(Q, D, queueEntry(id, id, ARGV[2], ARGV[3], ARGV[4]))
if not removed and not got[3] then
  return 0
end
local t = now()
spread(H, L, t, got[4]) -- a lone hold's lease goes into the leases (see leases.lua)
local used = dropLapsedSem(H, L, t)
if got[3] and redis.call('hexists', H, id) == 1 then
  used = used - tonumber(got[3])
  redis.call('hdel', H, id, labels(id))
  redis.call('zrem', L, id)
end
local granted
if got[2] then
  local woken
  used, woken, granted = grantPermits(H, L, Q, D, C, t, used, tonumber(got[2]))
end
keepSem(H, L, Q, D, t, used, nil, granted)
return 1
