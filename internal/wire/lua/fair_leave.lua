-- fair_leave.lua: remove a waiter that gives up (cancelled, timed out, client closed) from a
-- fair Mutex's queue. A grant the waiter got but never learned of is given back, and a lock
-- left free goes to the next live waiter (see mutex.lua).
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] deadlines, KEYS[4] channel, KEYS[5] fencing counter
-- ARGV[1] owner id
-- ARGV[2] request id of the waiting call
-- ARGV[3] its claim, ARGV[4] its fencing flag, ARGV[5] its label (optional; as in
--         fair_acquire.lua: they make its entry)
-- Returns 1 when the waiter was queued or granted, 0 when not. Idempotent: a grant given back
-- loses its "\1g" record. Everything is read before anything is written: a key of the wrong
-- type raises with nothing changed.
local H, Q, D, C, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, req = ARGV[1], ARGV[2]
local held = redis.call('hmget', H, owner, FIELD_GRANT, FIELD_KIND)
mustBeKind(H, '', held[3])
redis.call('llen', Q)
redis.call('zcard', D)
local removed = leaveQueue(Q, D, queueEntry(owner, req, ARGV[3], ARGV[4], ARGV[5]))
if held[1] and held[2] == req then
  redis.call('hdel', H, FIELD_GRANT)
  if tonumber(held[1]) > 1 then
    redis.call('hincrby', H, owner, -1) -- re-entered meanwhile by the owner elsewhere
  else
    handOver(H, Q, D, C, F, now())
  end
  return 1
end
if not held[1] and redis.call('exists', H) == 0 then
  handOver(H, Q, D, C, F, now())
end
if removed then
  return 1
end
return 0
