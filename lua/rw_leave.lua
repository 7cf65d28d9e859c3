-- rw_leave.lua: remove a waiter that gives up (cancelled, timed out, client closed) from a
-- read-write lock's waiting writers (plain) or queue (fair), waking those it held back.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] waiting writers, KEYS[4] queue, KEYS[5] deadlines (as
--         in rw_acquire.lua)
-- KEYS[6] channel
-- ARGV[1] owner id
-- ARGV[2] 'r' or 'w'
-- ARGV[3] 'fair' or 'plain'
-- Returns 1 when the waiter was there, 0 when not. Idempotent.
local H, L, W, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local owner, acc, fair = ARGV[1], ARGV[2], ARGV[3] == 'fair'
mustBeKind(H, 'rw', redis.call('hget', H, '\1k'))

if not fair then
  if acc ~= 'w' or redis.call('zrem', W, owner) == 0 then
    return 0
  end
  if redis.call('zcard', W) == 0 and not redis.call('hget', H, '\1w') then
    redis.call(PUBLISH, C, '*') -- readers it held back
  end
  return 1
end

redis.call('llen', Q)
local t = now()
local wasHead = redis.call('lindex', Q, 0) == acc .. ':' .. owner
if not leaveQueue(Q, D, acc .. ':' .. owner) then
  return 0
end
local head = purgeQueue(Q, D, t)
if head and not redis.call('hget', H, '\1w') then
  if string.sub(head, 1, 2) == 'r:' then
    redis.call(PUBLISH, C, '*')
  elseif wasHead and redis.call('zcount', L, '(' .. t, '+inf') == 0 then
    redis.call(PUBLISH, C, '@' .. head)
  end
end
return 1
