-- fair_release.lua: give back one hold of an owner of a fair Mutex; the last one hands the lock
-- to the first live waiter in the queue (direct handoff, see queue.lua). A repeated request
-- never releases twice.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] fencing counter
-- ARGV[1] owner id
-- ARGV[2] request id of this release (recorded as in release.lua)
-- Returns {remaining hold count, clients woken}, as release.lua. Everything is read before
-- anything is written: a key of the wrong type or a bad fencing counter (that the head's grant
-- needs) raises an error with the lock unchanged.
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
redis.call('llen', KEYS[3])
redis.call('zcard', KEYS[4])
return {0, handOver(KEYS[1], KEYS[3], KEYS[4], KEYS[2], KEYS[5], now())}
