-- sem_forcerelease.lua: delete every hold of a semaphore, whoever holds it, and grant the
-- permits to the waiters first in line (see grantPermits). Waiters keep their places; the hash
-- stays (with its expiry) while any wait, so their permit count is still checked.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] channel (as in
--         sem_acquire.lua)
-- Returns 1 when a hold was live, 0 when not. Raises WRONGTYPE, changing nothing, when a key
-- has another type or holds another kind of lock.
local H, L, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local got = redis.call('hmget', H, FIELD_KIND, FIELD_PERMITS, FIELD_LONE)
mustBeKind(H, 'sem', got[1])
redis.call('llen', Q)
redis.call('zcard', D)
local t = now()
local held = got[3] ~= false or redis.call('zcount', L, '(' .. t, '+inf') > 0 -- a lone hold is live
spread(H, L, t, got[3]) -- a lone hold's lease goes into the leases (see leases.lua)
for _, id in ipairs(redis.call('zrange', L, 0, -1)) do
  redis.call('hdel', H, id, labels(id))
end
redis.call('del', L)
local used, granted = 0, nil
if got[2] then
  local woken
  used, woken, granted = grantPermits(H, L, Q, D, C, t, 0, tonumber(got[2]))
end
keepSem(H, L, Q, D, t, used, nil, granted)
if held then
  return 1
end
return 0
