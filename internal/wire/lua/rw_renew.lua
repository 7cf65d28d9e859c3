-- rw_renew.lua: extend the leases of many read or write holds (all keys in one slot).
-- KEYS[2i-1], KEYS[2i] hash and leases of the lock of hold i (see rw_acquire.lua)
-- ARGV[1]   lease in milliseconds
-- ARGV[i+1] hold i: its field in the leases, "r:<owner id>" or "w:<owner id>" (an owner that
--           renews both of its modes is given twice); each mode has a lease of its own, and
--           only those the client renews (watchdog holds) are given
-- A renewal sets each lease to at least ARGV[1] from now: it never shortens one (ZADD GT; a
-- lone hold's, the hash's expiry, with keepFor: see leases.lua).
-- Returns an array: element i is 1 when hold i was there (lease not ended) and its lease was
-- extended, 0 otherwise.
local lease = tonumber(ARGV[1])
local t = now()
local out = {}
for i = 1, #ARGV - 1 do
  local H, L, field = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
  local ok, ends = pcall(redis.call, 'zscore', L, field)
  out[i] = 0
  if ok and ends and tonumber(ends) > t then
    redis.call('zadd', L, 'GT', t + lease, field)
    expireWith(H, L, t, 0)
    out[i] = 1
  elseif ok and not ends then
    local okH, lone = pcall(redis.call, 'hget', H, FIELD_LONE)
    if okH and lone == field then
      keepFor(H, lease, false)
      out[i] = 1
    end
  end
end
return out
