-- rw_release.lua: give back one read or write hold of an owner; a repeated request never
-- releases twice.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] waiting writers, KEYS[4] queue, KEYS[5] deadlines (as
--         in rw_acquire.lua)
-- KEYS[6] channel, KEYS[7] fencing counter (fair: for the grants it makes)
-- ARGV[1] owner id
-- ARGV[2] request id of this release (see lib.lua)
-- ARGV[3] 'r' or 'w'
-- ARGV[4] 'fair' or 'plain'
-- A partial release records its outcome; the owner's last hold deletes the owner's record (the
-- caller takes "nothing held" after a lost reply as its own release), and the lock's last hold
-- deletes the hash and the leases.
-- Wake-ups: plain: a writer's release publishes "*" (every waiting reader, and one other
-- waiter, of each client); the last holder's release publishes "0" (one waiter of each
-- client: a writer). Fair: when the lock frees up for the queue's head, it is granted to the
-- head (see grantRW).
-- Returns {remaining holds of that kind, clients woken, remaining holds of both kinds}; -1 as
-- the first element: the owner held none of that kind (nothing is written but lapsed holds and
-- waiters whose place ran out).
-- The fast path answers {0, n, 0} as the integer n (an integer costs Redis less to answer than a
-- table; see Script.Ints).
-- fast path {
-- The owner's last hold is the lone one (see leases.lua: live while the hash exists) and
-- (fair) nobody queues: the keys go, before any helper is made (see scripts.go); not a repeat
-- (its record, lib.lua's marker, names another request or none). FAST_GOT and FAST_QUEUED keep
-- what it read for the body (its fields() and EXISTS).
local FAST_GOT = redis.call('hmget', KEYS[1], FIELD_KIND, ARGV[3] .. ':' .. ARGV[1],
  '\0' .. string.sub(ARGV[2], 1, 12) .. ARGV[1], 'r:' .. ARGV[1], 'w:' .. ARGV[1], FIELD_WRITER, FIELD_LONE)
local FAST_QUEUED
if FAST_GOT[1] == 'rw' and FAST_GOT[2] == '1' and FAST_GOT[7] == ARGV[3] .. ':' .. ARGV[1] and
    (not FAST_GOT[3] or string.match(FAST_GOT[3], '^(.*):%d+$') ~= ARGV[2]) then
  if ARGV[4] ~= 'fair' then
    redis.call('del', KEYS[1], KEYS[2])
    return redis.call(PUBLISH, KEYS[6], ARGV[3] == 'w' and '*' or '0') -- {0, n, 0}, see Script.Ints
  end
  FAST_QUEUED = redis.call('exists', KEYS[4], KEYS[5])
  if FAST_QUEUED == 0 then
    redis.call('del', KEYS[1], KEYS[2])
    return 0 -- {0, 0, 0}, see Script.Ints
  end
end
-- } fast path
local H, L, W, Q, D, C, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local owner, req, acc, fair = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == 'fair'
local field = acc .. ':' .. owner

-- Fast path: the owner's last hold is the lock's only one and (fair) nobody queues: the keys
-- go, as the full path below would leave them, and no grant needs the fencing counter. The
-- hash and the leases expire with the latest lease (see expireWith), so while the hash exists
-- a lone lease has not ended (to the millisecond that the keys' expiry has).
-- One HMGET: kind, this hold count, the replay record, the owner's counts of both kinds, the
-- writer, the lone hold (see leases.lua: while the hash exists, its lease has not ended).
local function fields()
  return redis.call('hmget', H, FIELD_KIND, field, marker(req, owner), 'r:' .. owner, 'w:' .. owner, FIELD_WRITER,
    FIELD_LONE)
end
local got = FAST_GOT -- fields(), read by the fast path
mustBeKind(H, 'rw', got[1])
local last1 = got[2] == '1' and not recorded(got[3], req)
local only = last1 and got[7] == field and {field}
if last1 and not only then
  only = redis.call('zrange', L, 0, 1)
end
if only and #only == 1 and only[1] == field and (not fair or (FAST_QUEUED or redis.call('exists', Q, D)) == 0) then
  redis.call('del', H, L)
  local woken = 0
  if not fair then
    woken = redis.call(PUBLISH, C, acc == 'w' and '*' or '0')
  end
  return {0, woken, 0}
end

-- Every key is read before anything is written (a key of the wrong type raises with nothing
-- changed): the holds whose lease ended, the counter the grants need, then (fair) the queue's
-- head, whose dead waiters purgeQueue drops (it reads the deadlines before it writes).
local t = now()
local dead = {} -- (none while a lone hold is the only one: see leases.lua)
if not got[7] then
  dead = redis.call('zrangebyscore', L, '-inf', t)
end
local head = false
if fair then
  if badCounter(redis.call('get', F)) then
    return redis.error_reply('ERR fencing counter is not an integer or out of range')
  end
  head = purgeQueue(Q, D, t)
end
if dropLapsedRW(H, L, t, dead) > 0 then
  got = fields() -- a lapsed hold may have been one of those read
end

-- mine: the owner's hold counts of both kinds, kept as this script changes them
local mine = {r = tonumber(got[4] or '0'), w = tonumber(got[5] or '0')}
local function total()
  return mine.r + mine.w
end

local n = recorded(got[3], req)
if n then
  return {n, 0, total()}
end
if not got[2] then
  return {-1, 0, total()}
end
if tonumber(got[2]) > 1 then
  local count = redis.call('hincrby', H, field, -1)
  record(H, owner, req, count)
  mine[acc] = count
  return {count, 0, total()}
end

-- This hold goes: the lone one (see leases.lua) with its name, and no other hold is left;
-- else from the leases, where every hold is (another's lone hold moves there first).
local lone = got[7] == field
if not lone then
  spread(H, L, t, got[7])
end
mine[acc] = 0
local left = total()
local gone = {'hdel', H, field, FIELD_GRANT .. field, labels(field)}
if acc == 'w' then
  gone[#gone + 1] = FIELD_WRITER
end
if left == 0 then
  gone[#gone + 1] = marker(req, owner)
end
if lone then
  gone[#gone + 1] = FIELD_LONE
end
redis.call(unpack(gone))
if not lone then
  redis.call('zrem', L, field)
end
if left ~= 0 then
  record(H, owner, req, 0)
end
local last = {} -- the latest lease left, if any
if not lone then
  last = redis.call('zrange', L, -1, -1, 'WITHSCORES')
end
local holders = #last / 2
expireWith(H, L, t, 0, last)

local woken = 0
if not fair then
  if acc == 'w' then
    woken = redis.call(PUBLISH, C, '*')
  elseif holders == 0 then
    woken = redis.call(PUBLISH, C, '0')
  end
  return {0, woken, left}
end
if acc == 'w' or holders == 0 then
  local writer = got[6]
  if acc == 'w' then
    writer = false
  end
  woken = grantRW(H, L, Q, D, C, F, t, {writer = writer or false, held = holders > 0, head = head})
end
return {0, woken, left}
