-- release.lua: give back one hold of an owner; a repeated request never releases twice.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel
-- KEYS[3] fair queue, KEYS[4] fair deadlines (fair locks only)
-- ARGV[1] owner id
-- ARGV[2] request id of this Unlock
-- ARGV[3] unlock message; for a fair lock, the prefix of a message addressed to the head waiter
-- ARGV[4] '1' for a fair lock: wake only the live head of the queue, with ARGV[3]..owner
-- (A plain lock passes two keys and three arguments: each costs time on every call.)
-- A partial release records "<request id>:<count>" in the hash field NUL..owner (owner ids
-- have no control characters), so a repeat returns that count instead of releasing again; a
-- full release deletes the hash, marker included, so no key outlives the lock.
-- Returns {remaining hold count, clients woken}: count 0 means released (KEYS[1] deleted, and
-- the message reached "clients woken" subscribed clients), -1 that the owner holds nothing
-- (nothing is written).
-- Raises WRONGTYPE, writing nothing, when KEYS[1] is not a hash.
local marker = '\0' .. ARGV[1]
local held = redis.call('hmget', KEYS[1], ARGV[1], marker)
if held[2] then
  local id, n = string.match(held[2], '^(.*):(%d+)$')
  if id == ARGV[2] then
    return {tonumber(n), 0}
  end
end
if not held[1] then
  return {-1, 0}
end
if tonumber(held[1]) > 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
  redis.call('hset', KEYS[1], marker, ARGV[2] .. ':' .. count)
  return {count, 0}
end
redis.call('del', KEYS[1])
if ARGV[4] ~= '1' then
  return {0, redis.call('publish', KEYS[2], ARGV[3])}
end
-- Fair: purge dead heads (their deadline, in server time, has passed) and wake the first live one.
local head = redis.call('lindex', KEYS[3], 0)
if not head then
  return {0, 0}
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
while head do
  local deadline = redis.call('zscore', KEYS[4], head)
  if deadline and tonumber(deadline) > now then
    return {0, redis.call('publish', KEYS[2], ARGV[3] .. head)}
  end
  redis.call('lpop', KEYS[3])
  redis.call('zrem', KEYS[4], head)
  head = redis.call('lindex', KEYS[3], 0)
end
return {0, 0}
