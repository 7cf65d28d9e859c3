-- fair_forceunlock.lua: forceunlock.lua for a fair lock: delete it and wake the head waiter.
-- KEYS[1] lock hash
-- KEYS[2] queue
-- KEYS[4] channel (KEYS[3], the deadlines, is unused but keeps the key layout of the others)
-- ARGV[1] prefix of an addressed message
-- Returns 1 when the lock existed, 0 when it did not.
-- Raises WRONGTYPE, deleting nothing, when KEYS[1] is not a hash.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then
  redis.call('publish', KEYS[4], ARGV[1] .. head)
end
return 1
