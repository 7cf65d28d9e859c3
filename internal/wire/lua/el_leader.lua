-- el_leader.lua: read an election's leadership, changing nothing (it runs with EVALSHA_RO, so
-- also on a replica). The leader record is written with the leader's hold and goes with it,
-- so the hash exists exactly while somebody leads.
-- KEYS[1] lock hash
-- Returns {term, lease left in ms, value}: {0, 0, ''} when nobody leads (lease -1: a hash
-- without expiry). A hash of another kind raises WRONGTYPE.
local got = redis.call('hmget', KEYS[1], FIELD_TERM, FIELD_VALUE, FIELD_KIND)
mustBeKind(KEYS[1], KIND, got[3])
if not got[1] then
  return {0, 0, ''}
end
return {tonumber(got[1]) or 0, redis.call('pttl', KEYS[1]), got[2] or ''}
