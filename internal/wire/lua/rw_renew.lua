-- rw_renew.lua: extend the leases of many owners' read and write holds (all keys in one slot).
-- KEYS[2i-1], KEYS[2i] hash and leases of the lock of owner i (see rw_acquire.lua)
-- ARGV[1]   lease in milliseconds
-- ARGV[i+1] owner id i
-- Returns an array: element i is 1 when owner i held the lock (either kind, lease not ended)
-- and its leases were extended, 0 otherwise.
local lease = tonumber(ARGV[1])
local t = now()
local out = {}
for i = 1, #ARGV - 1 do
  local H, L, owner = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  local ok, ends = pcall(redis.call, 'zmscore', L, 'r:' .. owner, 'w:' .. owner)
  out[i] = 0
  if ok then
    for j, kind in ipairs({'r:', 'w:'}) do
      if ends[j] and tonumber(ends[j]) > t then
        redis.call('zadd', L, t + lease, kind .. owner)
        out[i] = 1
      end
    end
    if out[i] == 1 then
      expireWith(H, L, t, 0)
    end
  end
end
return out
