-- fair_acquire.lua: take a fair lock in arrival order, re-enter it, or wait in its queue.
-- KEYS[1] lock hash (as in acquire.lua)
-- KEYS[2] queue: waiting owners in arrival order (list)
-- KEYS[3] deadlines: owner -> server time (ms) after which the waiter has lost its place (zset)
-- KEYS[4] fencing counter (touched only when ARGV[3] == '1')
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] '1' to issue a fencing token for a new hold
-- ARGV[4] '1' to adopt a hold the owner already has without counting it again (after a lost reply)
-- ARGV[5] FairWaitTimeout in milliseconds: a waiter's deadline is its last call plus this
-- ARGV[6] 'wait' to join the queue (or refresh the caller's deadline there), 'try' never to join
-- Time is the server's (TIME), never a client clock. Waiters whose deadline passed are purged
-- from anywhere in the queue first. The lock goes to the caller only when it is free and the
-- caller heads the queue (or the queue is empty): nobody jumps the queue.
-- Returns {1, hold count, token} when acquired or re-entered, or {0, pttl, head} when not:
-- pttl is the holder's remaining lease (-1: no expiry, -2: free but another waiter is ahead),
-- head is 1 when the caller heads the queue. Queue and deadlines expire ARGV[5] after the
-- last call that touched them. Raises WRONGTYPE, writing nothing, when KEYS[1] is not a hash.
local owner = ARGV[1]

local function token(new)
  if ARGV[3] ~= '1' then
    return 0
  end
  if new then
    return redis.call('incr', KEYS[4])
  end
  return tonumber(redis.call('get', KEYS[4]) or '0')
end

local function take()
  redis.call('hset', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, token(true)}
end

local pttl = -2
if redis.call('exists', KEYS[1]) == 1 then
  local count = redis.call('hget', KEYS[1], owner)
  if count then
    if ARGV[4] ~= '1' then
      count = redis.call('hincrby', KEYS[1], owner, 1)
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    return {1, tonumber(count), token(false)}
  end
  pttl = redis.call('pttl', KEYS[1])
end

local head = redis.call('lindex', KEYS[2], 0)
if pttl == -2 and not head then
  return take() -- free, and nobody waits
end

local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local dead = redis.call('zrangebyscore', KEYS[3], '-inf', now)
for i = 1, #dead do
  redis.call('lrem', KEYS[2], 0, dead[i])
  redis.call('zrem', KEYS[3], dead[i])
end
if #dead > 0 then
  head = redis.call('lindex', KEYS[2], 0)
end

if pttl == -2 and (not head or head == owner) then
  if head then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], owner)
  end
  return take()
end

if ARGV[6] == 'wait' then
  if redis.call('zadd', KEYS[3], now + tonumber(ARGV[5]), owner) == 1 then
    redis.call('rpush', KEYS[2], owner)
    head = head or owner
  end
  redis.call('pexpire', KEYS[2], ARGV[5])
  redis.call('pexpire', KEYS[3], ARGV[5])
end
if head == owner then
  return {0, pttl, 1}
end
return {0, pttl, 0}
