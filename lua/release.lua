-- release.lua: give back one hold of an owner; a repeated request never releases twice.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel
-- ARGV[1] owner id
-- ARGV[2] request id of this Unlock
-- ARGV[3] unlock message
-- A partial release records "<request id>:<count>" in the hash field NUL..owner (owner ids
-- have no control characters), so a replay returns that count instead of releasing again; a
-- full release deletes the hash, marker included, so no key outlives the lock.
-- Returns the owner's remaining hold count (0: released, KEYS[1] deleted and ARGV[3] published
-- on KEYS[2]), or -1 when the owner holds nothing (nothing is written).
-- Raises WRONGTYPE, writing nothing, when KEYS[1] is not a hash.
local marker = '\0' .. ARGV[1]
local held = redis.call('hmget', KEYS[1], ARGV[1], marker)
if held[2] then
  local id, n = string.match(held[2], '^(.*):(%d+)$')
  if id == ARGV[2] then
    return tonumber(n)
  end
end
if not held[1] then
  return -1
end
if tonumber(held[1]) <= 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[3])
  return 0
end
local count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
redis.call('hset', KEYS[1], marker, ARGV[2] .. ':' .. count)
return count
