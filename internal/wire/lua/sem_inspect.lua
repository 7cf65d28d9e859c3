-- sem_inspect.lua: read how many permits of a semaphore are free, changing nothing.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] deadlines (as in sem_acquire.lua)
-- ARGV[1] permits of the semaphore
-- Returns {0, permits not held}, counting only holds whose lease has not ended, or {-3,
-- permits stored} when the semaphore is in use with another permit count.
local H, L, D = KEYS[1], KEYS[2], KEYS[3]
local permits = tonumber(ARGV[1])
local got = redis.call('hmget', H, FIELD_KIND, FIELD_PERMITS, FIELD_LONE)
mustBeKind(H, 'sem', got[1])
local stored = got[2]
local t = now()
if stored and stored ~= ARGV[1] and
    (got[3] or redis.call('zcount', L, '(' .. t, '+inf') > 0 or redis.call('zcount', D, '(' .. t, '+inf') > 0) then
  return {-3, tonumber(stored)}
end
local held = 0
local live = redis.call('zrangebyscore', L, '(' .. t, '+inf')
if got[3] then
  live = {got[3]} -- a lone hold, live while the hash exists (see leases.lua)
end
for _, id in ipairs(live) do
  held = held + tonumber(redis.call('hget', H, id) or '0')
end
return {0, permits - held}
