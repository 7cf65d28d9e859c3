-- inspect.lua: read a lock's state without changing it.
-- KEYS[1] lock hash
-- ARGV[1] owner id whose hold count to read ('' for none)
-- Returns {1 if the lock is held else 0, hold count of ARGV[1], pttl in ms (-2: no key,
-- -1: no expiry)}. Raises WRONGTYPE when KEYS[1] is not a hash.
mustBeKind(KEYS[1], '', redis.call('hget', KEYS[1], FIELD_KIND))
local count = 0
if ARGV[1] ~= '' then
  count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
else
  redis.call('hlen', KEYS[1])
end
return {redis.call('exists', KEYS[1]), count, redis.call('pttl', KEYS[1])}
