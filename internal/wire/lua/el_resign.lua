-- el_resign.lua: end a leader's term, if it is still the current one, and hand the election
-- to the next live candidate in the same script (direct handoff, see mutex.lua handOver): the
-- next leader's hold, value and term are written, it is told on the lock's channel and
-- observers on the leader channel. When nobody is next, observers hear "vacant <term>".
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines,
-- KEYS[5] fencing counter (the last term), KEYS[6] leader channel (see el_campaign.lua)
-- ARGV[1] candidate id of the term
-- ARGV[2] term, as the term context carries it
-- Returns {1, clients told on the lock's channel} when that term was current and has ended,
-- or {0, current term} when it is not current (0: nobody leads), changing nothing: the
-- candidate does not lead (the term was resigned already, or its lease ran out, or the hold
-- was lost), or leads with another term. A retried resign never ends a later term: every term
-- has a candidate of its own. A hash of another kind raises WRONGTYPE; a key of the wrong type
-- or a bad fencing counter raises, or returns an error, with the term still current.
local H, C, Q, D, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local held = redis.call('hmget', H, ARGV[1], FIELD_TERM, FIELD_KIND)
mustBeKind(H, KIND, held[3])
if not held[1] or held[2] ~= ARGV[2] then
  return {0, tonumber(held[2] or '0') or 0}
end
local woken, granted = freeFair(H, C, Q, D, F)
if type(woken) == 'table' then
  return woken -- a bad fencing counter: nothing done
end
if not granted then
  vacate(ARGV[2])
end
return {1, woken}
