-- fair_release.lua: release.lua for a fair lock: the wake-up goes to the head waiter only.
-- KEYS[1] lock hash
-- KEYS[2] queue
-- KEYS[3] deadlines
-- KEYS[4] channel
-- ARGV[1] owner id
-- ARGV[2] request id of this Unlock
-- ARGV[3] prefix of an addressed message; the head's owner id follows it
-- Returns the owner's remaining hold count (0: released, and the live head waiter, if any, is
-- sent ARGV[3]..head on KEYS[4]), or -1 when the owner holds nothing (nothing is written).
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
if tonumber(held[1]) > 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[1], -1)
  redis.call('hset', KEYS[1], marker, ARGV[2] .. ':' .. count)
  return count
end
redis.call('del', KEYS[1])
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then
    break
  end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline and tonumber(deadline) > now then
    redis.call('publish', KEYS[4], ARGV[3] .. head)
    break
  end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
end
return 0
