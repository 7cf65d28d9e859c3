-- release.lua: give back one hold of an owner; a repeated request never releases twice.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel
-- ARGV[1] owner id
-- ARGV[2] request id of this release (first 12 bytes: the client)
-- ARGV[3] unlock message
-- (A fair Mutex releases with fair_release.lua.)
-- A partial release records "<request id>:<count>" in the field NUL..client..owner (owner ids
-- have no control characters; one field per client and owner, so requests of other clients
-- sharing the owner never overwrite it), so a repeat returns that count instead of releasing
-- again; a full release deletes the hash, records included, so no key outlives the lock.
-- Returns {remaining hold count, clients woken}: count 0 means released (KEYS[1] deleted, and
-- the message reached "clients woken" subscribed clients), -1 that the owner holds nothing
-- (nothing is written). Everything is read before anything is written: a key of the wrong
-- type raises an error with nothing changed.
-- The fast path answers {0, n} as the integer n (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- The owner's only hold of a Mutex's hash (no kind field) goes, before any helper is made (see
-- scripts.go): not a repeat (its record, lib.lua's marker, names another request or none).
-- FAST_HELD keeps the HMGET for releaseHold.
local FAST_HELD = redis.call('hmget', KEYS[1], ARGV[1], '\0' .. string.sub(ARGV[2], 1, 12) .. ARGV[1], FIELD_KIND)
if FAST_HELD[1] == '1' and not FAST_HELD[3] and
    (not FAST_HELD[2] or string.match(FAST_HELD[2], '^(.*):%d+$') ~= ARGV[2]) then
  redis.call('del', KEYS[1])
  return redis.call(PUBLISH, KEYS[2], ARGV[3]) -- {0, n}, see Script.Ints
end
-- } fast path
local partial = releaseHold(KEYS[1], ARGV[1], ARGV[2], FAST_HELD)
if partial then
  return partial
end
redis.call('del', KEYS[1])
return {0, redis.call(PUBLISH, KEYS[2], ARGV[3])}
