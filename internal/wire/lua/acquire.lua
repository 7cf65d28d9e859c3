-- acquire.lua: take the lock for an owner, or re-enter it, in one step; a replayed request
-- returns its recorded outcome instead of counting again.
-- KEYS[1] lock hash (field = owner id, value = hold count; the key's expiry is the lease)
-- KEYS[2] fencing counter, given only for a mutex with fencing tokens
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] request id; each acquisition records it (see record and replayed in lib.lua), so the
--         same request sent again (after a lost reply) finds it and takes nothing more.
-- ARGV[4] mode: 'take' takes a free lock or re-enters; 'reenter' re-enters only and leaves a
--         free lock to the waiters (reply {0, -2}); 'resolve' changes nothing and reports
--         whether the request already ran (acquired) or not ({0, -2}).
-- A re-entry sets the lease to at least ARGV[2]: a lease is never shortened (see keepFor).
-- Returns {1, hold count, token} when acquired or re-entered (token 0 without fencing; a
-- re-entry keeps the hold's token), or {0, pttl} when another owner holds it (pttl -1: the
-- hash has no expiry). Everything is read before anything is written: a key of the wrong type
-- or a fencing counter that is not a number raises an error with nothing changed.
local owner, req, mode = ARGV[1], ARGV[3], ARGV[4]

-- PTTL answers both questions a failed attempt asks: is the lock there (-2: no) and how long
-- its lease runs; it type-checks nothing, so the HMGET below raises WRONGTYPE for a non-hash.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
  if mode ~= 'take' then
    return {0, -2}
  end
  local grace = graceLeft()
  if grace > 0 then
    return {0, grace} -- a restarted server: look again when its grace has passed
  end
  local t = fence(KEYS[2], true)
  if owner == req then
    redis.call('hset', KEYS[1], owner, 1)
  else
    redis.call('hset', KEYS[1], owner, 1, marker(req, owner), req .. ':1') -- with its record
  end
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, t}
end
local n, held = replayed(KEYS[1], owner, owner, req)
mustBeKind(KEYS[1], '', held[3])
if n then
  local t = fence(KEYS[2], false)
  if mode ~= 'resolve' then
    keepFor(KEYS[1], ARGV[2], false)
  end
  return {1, n, t}
end
if mode == 'resolve' then
  return {0, -2}
end
if held[1] then
  local t = fence(KEYS[2], false)
  local count = redis.call('hincrby', KEYS[1], owner, 1)
  record(KEYS[1], owner, req, count)
  keepFor(KEYS[1], ARGV[2], false) -- never shortens the lease another hold of the owner has
  return {1, count, t}
end
return {0, pttl}
