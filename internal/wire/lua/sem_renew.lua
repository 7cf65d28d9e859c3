-- sem_renew.lua: extend the leases of many semaphore holds (all keys in one slot).
-- KEYS[2i-1], KEYS[2i] hash and leases of the semaphore of hold i (see sem_acquire.lua)
-- ARGV[1]   lease in milliseconds
-- ARGV[i+1] hold id i
-- Returns an array: element i is 1 when hold i was renewed, 0 when it no longer exists (its
-- lease ended, or it was released or deleted).
local lease = tonumber(ARGV[1])
local t = now()
local out = {}
for i = 1, #ARGV - 1 do
  local H, L, id = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  local ok, e = pcall(redis.call, 'zscore', L, id)
  out[i] = 0
  if ok and e and tonumber(e) > t then
    redis.call('zadd', L, t + lease, id)
    local floor = redis.call('pttl', H)
    expireWith(H, L, t, math.max(floor, 0))
    out[i] = 1
  elseif ok and not e then
    -- a lone hold (see leases.lua): its lease is the hash's expiry, never shortened
    local okH, lone = pcall(redis.call, 'hget', H, FIELD_LONE)
    if okH and lone == id then
      keepFor(H, lease, false)
      out[i] = 1
    end
  end
end
return out
