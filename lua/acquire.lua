-- acquire.lua: take the lock for an owner, or re-enter it, in one step; a replayed request
-- returns its recorded outcome instead of counting again.
-- KEYS[1] lock hash (field = owner id, value = hold count; the key's expiry is the lease)
-- KEYS[2] fencing counter, given only for a mutex with fencing tokens
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] request id; its first 12 bytes name the client. Each acquisition records
--         "<request id>:<count>" in the field NUL..client..owner, so the same request sent again
--         (after a lost reply) finds it and takes nothing more. An owner id equal to the request
--         id was made for this call: no record, and any hold of that owner is this request's.
-- ARGV[4] mode: 'take' takes a free lock or re-enters; 'reenter' re-enters only and leaves a
--         free lock to the waiters (reply {0, -2}); 'resolve' changes nothing and reports
--         whether the request already ran (acquired) or not ({0, -2}).
-- Returns {1, hold count, token} when acquired or re-entered (token 0 without fencing; a
-- re-entry keeps the hold's token), or {0, pttl} when another owner holds it (pttl -1: the
-- hash has no expiry). Everything is read before anything is written: a key of the wrong type
-- or a fencing counter that is not a number raises an error with nothing changed.
local owner, req, mode = ARGV[1], ARGV[3], ARGV[4]
local marker = '\0' .. string.sub(req, 1, 12) .. owner
-- An owner made for this call (its id is the request id) is held by nobody else: its first hold
-- needs no record, and a hold of it can only be this request's.
local fresh = owner == req

local function token()
  if KEYS[2] then
    return tonumber(redis.call('get', KEYS[2]) or '0')
  end
  return 0
end

if redis.call('exists', KEYS[1]) == 0 then
  if mode ~= 'take' then
    return {0, -2}
  end
  local t = 0
  if KEYS[2] then
    t = redis.call('incr', KEYS[2])
  end
  if fresh then
    redis.call('hset', KEYS[1], owner, 1)
  else
    redis.call('hset', KEYS[1], owner, 1, marker, req .. ':1')
  end
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, t}
end
local held = redis.call('hmget', KEYS[1], owner, marker)
if fresh and held[1] then
  held[2] = req .. ':' .. held[1]
end
if held[1] and held[2] then
  local id, n = string.match(held[2], '^(.*):(%d+)$')
  if id == req then
    local t = token()
    if mode ~= 'resolve' then
      redis.call('pexpire', KEYS[1], ARGV[2])
    end
    return {1, tonumber(n), t}
  end
end
if mode == 'resolve' then
  return {0, -2}
end
if held[1] then
  local t = token()
  local count = redis.call('hincrby', KEYS[1], owner, 1)
  redis.call('hset', KEYS[1], marker, req .. ':' .. count)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, count, t}
end
return {0, redis.call('pttl', KEYS[1])}
