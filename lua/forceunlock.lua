-- forceunlock.lua: delete the lock whoever holds it and wake a waiter.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel
-- ARGV[1] unlock message
-- Returns 1 when the lock existed (deleted, ARGV[1] published), 0 when it did not.
-- Raises WRONGTYPE, deleting nothing, when KEYS[1] is not a hash.
local t = redis.call('type', KEYS[1]).ok
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
