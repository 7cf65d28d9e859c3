-- rw_inspect.lua: read a read-write lock's state without changing it.
-- KEYS[1] hash, KEYS[2] leases (see rw_acquire.lua)
-- ARGV[1] owner id whose hold counts to read ('' for none)
-- Returns {1 if an owner holds it for writing else 0, owners holding it for reading, the
-- owner's read holds, its write holds}, counting only holds whose lease has not ended.
-- Raises WRONGTYPE when a key has another type.
local H, L, owner = KEYS[1], KEYS[2], ARGV[1]
local top = redis.call('hmget', H, FIELD_KIND, FIELD_LONE)
mustBeKind(H, 'rw', top[1])
local t = now()
local writer, readers = 0, 0
local live = redis.call('zrangebyscore', L, '(' .. t, '+inf')
if top[2] then
  live = {top[2]} -- a lone hold, live while the hash exists (see leases.lua)
end
for _, m in ipairs(live) do
  if string.sub(m, 1, 2) == 'w:' then
    writer = 1
  else
    readers = readers + 1
  end
end
local r, w = 0, 0
if owner ~= '' then
  local ends = redis.call('zmscore', L, 'r:' .. owner, 'w:' .. owner)
  if top[2] then
    ends = {top[2] == 'r:' .. owner and t + 1, top[2] == 'w:' .. owner and t + 1}
  end
  local counts = redis.call('hmget', H, 'r:' .. owner, 'w:' .. owner)
  if ends[1] and tonumber(ends[1]) > t then
    r = tonumber(counts[1] or '0')
  end
  if ends[2] and tonumber(ends[2]) > t then
    w = tonumber(counts[2] or '0')
  end
end
return {writer, readers, r, w}
