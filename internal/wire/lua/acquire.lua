-- acquire.lua: take the lock for an owner, or re-enter it, in one step; a replayed request
-- returns its recorded outcome instead of counting again.
-- KEYS[1] lock hash (field = owner id, value = hold count; the key's expiry is the lease)
-- KEYS[2] fencing counter, given only for a mutex with fencing tokens
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] request id; each acquisition records it (see readHold in mutex.lua), so the
--         same request sent again (after a lost reply) finds it and takes nothing more.
-- ARGV[4] mode: 'take' takes a free lock or re-enters; 'reenter' re-enters only and leaves a
--         free lock to the waiters (reply {0, -2}); 'resolve' changes nothing and reports
--         whether the request already ran (acquired) or not ({0, -2}); 'takenew' is 'take'
--         for an owner made for this request (owner id = request id) after an earlier attempt
--         of the request was answered and none was lost: nobody else can hold as that owner,
--         and the request has not run, so a lock that is there is another owner's and its
--         hash is not read (a waiter's retry: PTTL alone; the first attempt, a 'take', has
--         type-checked the key).
-- ARGV[5] label of the hold (optional; '' or none: unlabelled), see labelHold in lib.lua
-- Returns {1, hold count, token} when acquired or re-entered (token 0 without fencing; a
-- re-entry keeps the hold's token), or {0, pttl} when another owner holds it (pttl -1: the
-- hash has no expiry). Everything is read before anything is written: a key of the wrong type
-- or a bad fencing counter (see counterError) raises an error with nothing changed.
-- A re-entry sets the lease to at least ARGV[2]: a lease is never shortened (see keepFor).
-- The fast path answers {1, 1, 0} as the integer 1 (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- A free lock taken without fencing, before any helper is made (see scripts.go), as takeHold
-- does it (record field: lib.lua's marker); FAST_PTTL keeps PTTL's answer for plainRead.
local FAST_PTTL
if GRACE == 0 and (ARGV[4] == 'take' or ARGV[4] == 'takenew') and not KEYS[2] and (ARGV[5] or '') == '' then
  FAST_PTTL = redis.call('pttl', KEYS[1])
  if FAST_PTTL == -2 then
    if ARGV[1] == ARGV[3] then
      redis.call('hset', KEYS[1], ARGV[1], 1)
    else
      redis.call('hset', KEYS[1], ARGV[1], 1, '\0' .. string.sub(ARGV[3], 1, 12) .. ARGV[1], ARGV[3] .. ':1')
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1 -- {1, 1, 0}, see Script.Ints
  end
end
-- } fast path
local owner, req, mode = ARGV[1], ARGV[3], ARGV[4]
local what, n = plainRead(KEYS[1], owner, req, mode, FAST_PTTL) -- see mutex.lua
if what == 'free' then
  local bad = counterError(KEYS[2], true)
  if bad then
    return bad
  end
  local t = fence(KEYS[2], true)
  takeHold(KEYS[1], owner, req, ARGV[2], t, '')
  labelHold(KEYS[1], owner, ARGV[5])
  return {1, 1, t}
elseif what == 'ran' then
  local t = fence(KEYS[2], false)
  if mode ~= 'resolve' then
    extend(KEYS[1], ARGV[2]) -- never shortens the lease another hold of the owner has
  end
  return {1, n, t}
elseif what == 'held' then
  local t = fence(KEYS[2], false)
  local count = reenterHold(KEYS[1], owner, req, ARGV[2])
  labelHold(KEYS[1], owner, ARGV[5])
  return {1, count, t}
elseif what == 'none' then
  return {0, -2}
end
return {0, n}
