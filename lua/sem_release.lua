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
local used = tonumber(redis.call('hget', H, '\1u') or '0')
for _, dead in ipairs(lapsed(L, t)) do
  used = used - tonumber(redis.call('hget', H, dead) or '0')
  redis.call('hdel', H, dead)
end
local n = redis.call('hget', H, id)
if n then
  used = used - tonumber(n)
  redis.call('hdel', H, id)
  redis.call('zrem', L, id)
end
if used < 0 then
  used = 0
end
local head = purgeQueue(Q, D, t)
local last = redis.call('zrange', D, -1, -1, 'WITHSCORES')
if redis.call('zcard', L) == 0 and not head then
  redis.call('del', H, L, Q, D)
else
  redis.call('hset', H, '\1k', 'sem', '\1u', used)
  local floor = 0
  if last[2] then
    floor = tonumber(last[2]) - t
  end
  expireWith(H, L, t, floor)
end
if not n then
  return {-1, 0}
end
if head then
  return {0, redis.call(PUBLISH, C, '@' .. head)}
end
return {0, 0}
