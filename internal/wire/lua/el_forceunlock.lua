-- el_forceunlock.lua: end the current term whoever leads, and hand the election to the next
-- live candidate (see mutex.lua handOver), or tell observers "vacant <term>". The leader's
-- process finds its term lost at its next renewal.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines,
-- KEYS[5] fencing counter (the last term), KEYS[6] leader channel (see el_campaign.lua)
-- Returns 1 when somebody led (its term ended), 0 when not (nothing changed). A hash of
-- another kind raises WRONGTYPE.
local H, C, Q, D, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local got = redis.call('hmget', H, FIELD_TERM, FIELD_KIND)
mustBeKind(H, KIND, got[2])
if not got[1] then
  return 0 -- nobody leads (a leader's hash always has its term)
end
local woken, granted = freeFair(H, C, Q, D, F)
if type(woken) == 'table' then
  return woken -- a bad fencing counter: nothing done
end
if not granted then
  vacate(got[1])
end
return 1
