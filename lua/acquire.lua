-- acquire.lua: take the lock for an owner, or re-enter it, in one step.
-- KEYS[1] lock hash (field = owner id, value = hold count; the key's expiry is the lease)
-- KEYS[2] fencing counter, given only for a mutex with fencing tokens
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] optional: '1' to adopt a hold the owner already has without counting it again (used
--         after an attempt whose reply was lost, so a retry never takes the lock twice);
--         '2' to re-enter only: a free lock is left for the waiters (reply {0, -2})
-- (Arguments that are not needed are left out: each costs time on every call.)
-- Returns {1, hold count, token} when acquired or re-entered (token 0 without fencing; a
-- re-entry keeps the hold's token), or {0, pttl} when another owner holds it (pttl -1: the
-- hash has no expiry; -2: free, left alone by a re-entry-only call). Raises WRONGTYPE, writing nothing, when KEYS[1] is not a hash.
if redis.call('exists', KEYS[1]) == 0 then
  if ARGV[3] == '2' then
    return {0, -2}
  end
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  local token = 0
  if KEYS[2] then
    token = redis.call('incr', KEYS[2])
  end
  return {1, 1, token}
end
local count = redis.call('hget', KEYS[1], ARGV[1])
if count then
  if ARGV[3] ~= '1' then
    count = redis.call('hincrby', KEYS[1], ARGV[1], 1)
  end
  redis.call('pexpire', KEYS[1], ARGV[2])
  local token = 0
  if KEYS[2] then
    token = tonumber(redis.call('get', KEYS[2]) or '0')
  end
  return {1, tonumber(count), token}
end
return {0, redis.call('pttl', KEYS[1])}
