-- sem_release.lua: give back the permits of one semaphore hold, once, and wake the queue's head.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] channel (as in
--         sem_acquire.lua)
-- ARGV[1] hold id
-- Returns {0, clients woken} when released, {-1, 0} when the hold does not exist (released
-- already, or its lease ended: its permits came back then). A repeat finds nothing to release.
local H, L, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
mustBeKind(H, 'sem', redis.call('hget', H, '\1k'))
redis.call('llen', Q)
local t = now()
local used = dropLapsedSem(H, L, t)
local n = redis.call('hget', H, id)
if n then
  used = used - tonumber(n)
  redis.call('hdel', H, id)
  redis.call('zrem', L, id)
end
local head = purgeQueue(Q, D, t)
keepSem(H, L, Q, D, t, used)
if not n then
  return {-1, 0}
end
if head then
  return {0, redis.call(PUBLISH, C, '@' .. head)}
end
return {0, 0}
