-- renew.lua: extend the leases of many watchdog holds in one step (all keys in one slot).
-- KEYS[i]   lock hash of hold i
-- ARGV[1]   lease in milliseconds
-- ARGV[i+1] owner id of hold i
-- A renewal sets each lease to at least ARGV[1]: it never shortens one (see keepFor).
-- Returns an array: element i is 1 when hold i was renewed, 0 when its owner no longer holds
-- KEYS[i] (expired, deleted, force-unlocked, or replaced by a key of another type).
local out = {}
for i = 1, #KEYS do
  local ok, held = pcall(redis.call, 'hexists', KEYS[i], ARGV[i + 1])
  if ok and held == 1 then
    keepFor(KEYS[i], ARGV[1], false) -- a longer fixed lease of a re-entry stays
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
