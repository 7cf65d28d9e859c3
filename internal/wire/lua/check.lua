-- check.lua: report which of many holds still exist, changing nothing (all keys in one slot).
-- It checks fixed-lease holds after a server restart or failover (see notice.go).
-- ARGV[1]   the holds' kind: 'mutex' (KEYS[i]: lock hash of hold i), or 'rw' or 'sem'
--           (KEYS[2i-1], KEYS[2i]: hash and leases of the lock of hold i, as their renewal takes)
-- ARGV[i+1] owner id (a semaphore: hold id) of hold i
-- Returns an array: element i is 1 when hold i still exists with its lease not ended, else 0.
-- (A lone hold of an RWMutex or a Semaphore has no entry in the leases: FIELD_LONE names it,
-- and its lease is the hash's expiry, live while the hash exists: see leases.lua.)
local k = ARGV[1]
local t = now()
local out = {}
for i = 1, #ARGV - 1 do
  local owner = ARGV[i + 1]
  out[i] = 0
  if k == 'mutex' then
    local ok, held = pcall(redis.call, 'hexists', KEYS[i], owner)
    if ok and held == 1 then
      out[i] = 1
    end
  elseif k == 'rw' then
    local ok, ends = pcall(redis.call, 'zmscore', KEYS[2 * i], 'r:' .. owner, 'w:' .. owner)
    if ok then
      for j = 1, 2 do
        if ends[j] and tonumber(ends[j]) > t then
          out[i] = 1
        end
      end
      if not ends[1] and not ends[2] then
        local okH, lone = pcall(redis.call, 'hget', KEYS[2 * i - 1], FIELD_LONE)
        if okH and (lone == 'r:' .. owner or lone == 'w:' .. owner) then
          out[i] = 1
        end
      end
    end
  else
    local ok, e = pcall(redis.call, 'zscore', KEYS[2 * i], owner)
    if ok and e and tonumber(e) > t then
      out[i] = 1
    elseif ok and not e then
      local okH, lone = pcall(redis.call, 'hget', KEYS[2 * i - 1], FIELD_LONE)
      if okH and lone == owner then
        out[i] = 1
      end
    end
  end
end
return out
