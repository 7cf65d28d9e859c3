-- forceunlock.lua: delete the lock whoever holds it and wake a waiter.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel
-- KEYS[3] fair queue (fair locks only)
-- ARGV[1] unlock message; for a fair lock, the prefix of a message addressed to the head waiter
-- ARGV[2] optional: '1' for a fair lock: wake only the head of the queue, with ARGV[1] and its
--         address (the head takes the lock itself)
-- Returns 1 when the lock existed (deleted, a waiter woken), 0 when it did not.
-- Raises WRONGTYPE, deleting nothing, when KEYS[1] is not a hash or KEYS[3] not a list.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
mustBeKind(KEYS[1], '', redis.call('hget', KEYS[1], FIELD_KIND))
if ARGV[2] ~= '1' then
  redis.call('del', KEYS[1])
  redis.call(PUBLISH, KEYS[2], ARGV[1])
  return 1
end
local head = redis.call('lindex', KEYS[3], 0)
redis.call('del', KEYS[1])
if head then
  redis.call(PUBLISH, KEYS[2], ARGV[1] .. splitEntry(head))
end
return 1
