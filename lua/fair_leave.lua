-- fair_leave.lua: remove a waiter that gives up (cancelled, timed out, client closed) from a
-- fair lock's queue, and wake the new head if the lock is free.
-- KEYS[1] lock hash
-- KEYS[2] queue
-- KEYS[3] deadlines
-- KEYS[4] channel
-- ARGV[1] owner id
-- ARGV[2] prefix of an addressed message
-- Returns 1 when the owner was queued, 0 when it was not. Idempotent. The queue and the lock
-- are read before anything is written: a key of the wrong type raises with nothing changed.
local free = redis.call('exists', KEYS[1]) == 0
redis.call('llen', KEYS[2])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if free then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(PUBLISH, KEYS[4], ARGV[2] .. head)
  end
end
return removed
