-- fair_release.lua: give back one hold of an owner of a fair Mutex; the last one hands the lock
-- to the first live waiter in the queue (direct handoff, see mutex.lua). A repeated request
-- never releases twice.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] fencing counter
-- ARGV[1] owner id
-- ARGV[2] request id of this release (recorded as in release.lua)
-- Returns {remaining hold count, clients woken}, as release.lua. Everything is read before
-- anything is written: a key of the wrong type or a bad fencing counter (that the head's grant
-- needs) raises an error with the lock unchanged.
local partial = releaseHold(KEYS[1], ARGV[1], ARGV[2])
if partial then
  return partial
end
-- the last hold: the lock frees up, or goes to the first live waiter (see mutex.lua freeFair)
local woken = freeFair(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return {0, woken}
