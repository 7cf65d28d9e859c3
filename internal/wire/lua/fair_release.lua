-- fair_release.lua: give back one hold of an owner of a fair Mutex; the last one hands the lock
-- to the first live waiter in the queue (direct handoff, see mutex.lua). A repeated request
-- never releases twice.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] fencing counter
-- ARGV[1] owner id
-- ARGV[2] request id of this release (recorded as in release.lua)
-- Returns {remaining hold count, clients woken}, as release.lua. Everything is read before
-- anything is written: a key of the wrong type or a bad fencing counter (that the head's grant
-- needs) raises an error with the lock unchanged.
-- The fast path answers {0, 0} as the integer 0 (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- The owner's only hold of a Mutex's hash (no kind field) goes, nobody waiting, before any
-- helper is made (see scripts.go): not a repeat (as in release.lua). FAST_HELD and FAST_QUEUED
-- keep what it read for releaseHold and freeFair.
local FAST_HELD = redis.call('hmget', KEYS[1], ARGV[1], '\0' .. string.sub(ARGV[2], 1, 12) .. ARGV[1], FIELD_KIND)
local FAST_QUEUED
if FAST_HELD[1] == '1' and not FAST_HELD[3] and
    (not FAST_HELD[2] or string.match(FAST_HELD[2], '^(.*):%d+$') ~= ARGV[2]) then
  FAST_QUEUED = redis.call('exists', KEYS[3], KEYS[4])
  if FAST_QUEUED == 0 then
    redis.call('del', KEYS[1])
    return 0 -- {0, 0}, see Script.Ints
  end
end
-- } fast path
local partial = releaseHold(KEYS[1], ARGV[1], ARGV[2], FAST_HELD)
if partial then
  return partial
end
-- the last hold: the lock frees up, or goes to the first live waiter (see mutex.lua freeFair)
local woken = freeFair(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], FAST_QUEUED)
return {0, woken}
