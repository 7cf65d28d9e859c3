-- el_proclaim.lua: change the value observers see of a leader's term, if it is still the
-- current one; the term stays.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines,
-- KEYS[5] fencing counter (the last term), KEYS[6] leader channel (see el_campaign.lua; it
--         uses the first and the last)
-- ARGV[1] candidate id of the term
-- ARGV[2] term, as the term context carries it
-- ARGV[3] value (the caller bounds its size)
-- Returns {1, clients told on the leader channel} when the term was current: the value is
-- stored and "proclaim <term> <lease ms> <value>" goes out on the leader channel; or {0,
-- current term} (0: nobody leads) when it is not current, changing nothing (as el_resign.lua).
-- A hash of another kind raises WRONGTYPE.
local H = KEYS[1]
local held = redis.call('hmget', H, ARGV[1], FIELD_TERM, FIELD_KIND)
mustBeKind(H, KIND, held[3])
if not held[1] or held[2] ~= ARGV[2] then
  return {0, tonumber(held[2] or '0') or 0}
end
redis.call('hset', H, FIELD_VALUE, ARGV[3])
local lease = redis.call('pttl', H)
return {1, redis.call(PUBLISH, LEADER, leaderMessage('proclaim', ARGV[2], lease, ARGV[3]))}
