-- rw_leave.lua: remove a waiter that gives up (cancelled, timed out, client closed) from a
-- read-write lock's waiting writers (plain) or queue (fair), letting in those it held back; a
-- fair waiter also gives back a hold a release granted it that it never learned of.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] waiting writers, KEYS[4] queue, KEYS[5] deadlines (as
--         in rw_acquire.lua)
-- KEYS[6] channel, KEYS[7] fencing counter
-- ARGV[1] owner id
-- ARGV[2] 'r' or 'w'
-- ARGV[3] 'fair' or 'plain'
-- ARGV[4] request id of the waiting call, ARGV[5] its claim, ARGV[6] its fencing flag, ARGV[7]
--         its label (optional) (fair: they make its queue entry, see rw_acquire.lua)
-- Returns 1 when the waiter was there (or granted), 0 when not. Idempotent.
local H, L, W, Q, D, C, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local owner, acc, fair, req = ARGV[1], ARGV[2], ARGV[3] == 'fair', ARGV[4]
local field = acc .. ':' .. owner
local top = redis.call('hmget', H, FIELD_KIND, FIELD_LONE)
mustBeKind(H, 'rw', top[1])

if not fair then
  if acc ~= 'w' or redis.call('zrem', W, writerMember(owner, ARGV[7])) == 0 then
    return 0
  end
  if redis.call('zcard', W) == 0 and not redis.call('hget', H, FIELD_WRITER) then
    redis.call(PUBLISH, C, '*') -- readers it held back
  end
  return 1
end

redis.call('llen', Q)
redis.call('zcard', D)
if badCounter(redis.call('get', F)) then
  return redis.error_reply('ERR fencing counter is not an integer or out of range')
end
local t = now()
dropLapsedRW(H, L, t)
local removed = leaveQueue(Q, D, queueEntry(field, req, ARGV[5], ARGV[6], ARGV[7]))
local granted = redis.call('hmget', H, FIELD_GRANT .. field, field)
if removed or (granted[1] == req and granted[2]) then
  spread(H, L, t, top[2]) -- a lone hold's lease goes into the leases (see leases.lua)
end
if granted[1] == req and granted[2] then
  redis.call('hdel', H, FIELD_GRANT .. field)
  if tonumber(granted[2]) > 1 then
    redis.call('hincrby', H, field, -1) -- re-entered meanwhile by the owner elsewhere
    return 1
  end
  redis.call('hdel', H, field, labels(field))
  redis.call('zrem', L, field)
  if acc == 'w' then
    redis.call('hdel', H, FIELD_WRITER)
  end
  expireWith(H, L, t, 0)
  removed = true
end
if removed then
  grantRW(H, L, Q, D, C, F, t)
  return 1
end
return 0
