-- release.lua: give back one hold of an owner; a repeated request never releases twice.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel
-- KEYS[3] fair queue, KEYS[4] fair deadlines (fair locks only)
-- ARGV[1] owner id
-- ARGV[2] request id of this release (first 12 bytes: the client)
-- ARGV[3] unlock message; for a fair lock, the prefix of a message addressed to the head waiter
-- ARGV[4] '1' for a fair lock: wake only the live head of the queue, with ARGV[3]..owner
-- (A plain lock passes two keys and three arguments: each costs time on every call.)
-- A partial release records "<request id>:<count>" in the field NUL..client..owner (owner ids
-- have no control characters; one field per client and owner, so requests of other clients
-- sharing the owner never overwrite it), so a repeat returns that count instead of releasing
-- again; a full release deletes the hash, records included, so no key outlives the lock.
-- Returns {remaining hold count, clients woken}: count 0 means released (KEYS[1] deleted, and
-- the message reached "clients woken" subscribed clients), -1 that the owner holds nothing
-- (nothing is written). Everything is read before anything is written: a key of the wrong
-- type raises an error with nothing changed.
local owner, req = ARGV[1], ARGV[2]
local held = redis.call('hmget', KEYS[1], owner, marker(req, owner), '\1k')
mustBeKind(KEYS[1], '', held[3])
local n = recorded(held[2], req)
if n then
  return {n, 0}
end
if not held[1] then
  return {-1, 0}
end
if tonumber(held[1]) > 1 then
  local count = redis.call('hincrby', KEYS[1], owner, -1)
  redis.call('hset', KEYS[1], marker(req, owner), req .. ':' .. count)
  return {count, 0}
end
if ARGV[4] ~= '1' then
  redis.call('del', KEYS[1])
  return {0, redis.call(PUBLISH, KEYS[2], ARGV[3])}
end
-- Fair: purge dead heads (their deadline, in server time, has passed, or they have none) and
-- wake the first live one. The queue and the head's deadline are read before the delete.
local head = redis.call('lindex', KEYS[3], 0)
local deadline = head and redis.call('zscore', KEYS[4], head)
redis.call('del', KEYS[1])
if not head then
  return {0, 0}
end
local now = now()
while head do
  if deadline and tonumber(deadline) > now then
    return {0, redis.call(PUBLISH, KEYS[2], ARGV[3] .. head)}
  end
  redis.call('lpop', KEYS[3])
  redis.call('zrem', KEYS[4], head)
  head = redis.call('lindex', KEYS[3], 0)
  deadline = head and redis.call('zscore', KEYS[4], head)
end
return {0, 0}
