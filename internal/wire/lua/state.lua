-- state.lua: who holds a lock and who waits, as of one instant of the server's clock. It
-- writes nothing (it runs with EVALSHA_RO, so also on a replica): lapsed holds and waiters
-- are left out, not purged.
-- KEYS[1] hash, KEYS[2] leases, KEYS[3] waiting writers, KEYS[4] queue, KEYS[5] deadlines,
-- KEYS[6] fencing counter (see the acquire script of each kind)
-- ARGV[1] the kind the caller made ('mutex', 'fair_mutex', 'rw_mutex', 'fair_rw_mutex',
--         'semaphore', 'election'), or '' to tell it from the keys (a fair kind shows only
--         while its queue exists, an election only while somebody leads; '' in the reply when
--         no key is there)
-- Returns {kind, fencing counter (a string; '0' without one), the semaphore's stored permit
-- count (0 if none), holders, waiters}: holders is a flat list of {owner, count, mode, lease
-- left in ms (-1: a mutex hash without expiry), label ('' for none), ms held since the
-- labelled hold began (0: unlabelled)}, waiters a flat list of {owner, mode, permits, ms until
-- its place lapses, label} in serving order; mode is 'write', 'read' or ''. A grant in flight
-- is a hold already (the granting script wrote it and dequeued the waiter). An election's
-- holder is its leader (the candidate id), its waiters its candidates, and its fencing counter
-- the last term (the leader's value: el_leader.lua). Raises WRONGTYPE
-- when a key has another type or the hash holds another kind than ARGV[1].
local H, L, W, Q, D, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local kind = ARGV[1]
local got = redis.call('hmget', H, FIELD_KIND, FIELD_PERMITS, FIELD_LONE)

-- told returns the kind that the keys show (got[1] is the hash's "\1k").
local function told()
  local queued = redis.call('exists', Q, D) > 0
  if got[1] == 'rw' then
    return queued and 'fair_rw_mutex' or 'rw_mutex'
  elseif got[1] == 'sem' then
    return 'semaphore'
  elseif got[1] == 'el' then
    return 'election'
  elseif got[1] then
    return got[1] -- no kind of this library: refused below
  end
  if redis.call('exists', H) == 1 then
    if queued or redis.call('hexists', H, FIELD_GRANT) == 1 then
      return 'fair_mutex'
    end
    return 'mutex'
  end
  if redis.call('exists', W, L) > 0 then
    return 'rw_mutex'
  end
  local head = redis.call('lindex', Q, 0)
  if head then
    -- a free lock's queue: a read-write lock's entries are "<r|w>:<owner>..."
    if string.match(head, '^[rw]:') then
      return 'fair_rw_mutex'
    end
    return 'fair_mutex'
  end
  return ''
end

if kind == '' then
  kind = told()
  if kind == '' then
    return {'', redis.call('get', F) or '0', 0, {}, {}}
  end
end
local family = ({mutex = '', fair_mutex = '', rw_mutex = 'rw', fair_rw_mutex = 'rw', semaphore = 'sem',
  election = 'el'})[kind]
if not family then
  error({err = 'WRONGTYPE the key holds a lock of another kind'})
end
mustBeKind(H, family, got[1])

local t = now()
local holders, waiters = {}, {}
local held = {} -- hash field -> true, for each hold listed
local modes = {r = 'read', w = 'write'}

-- hold lists the hold of owner (count, mode, lease ms) with its label and since fields (their
-- values as read: nil or false for none).
local function hold(owner, count, mode, lease, label, since)
  local n = #holders
  holders[n + 1], holders[n + 2], holders[n + 3], holders[n + 4] = owner, tonumber(count) or 0, mode, lease
  holders[n + 5], holders[n + 6] = label or '', since and math.max(t - (tonumber(since) or t), 0) or 0
end

if family == '' or family == 'el' then
  local pttl = redis.call('pttl', H)
  if pttl > 0 or pttl == -1 then
    local all = redis.call('hgetall', H)
    local fields = {}
    for i = 1, #all, 2 do
      fields[all[i]] = all[i + 1]
    end
    for i = 1, #all, 2 do
      local f = all[i]
      local b = string.byte(f, 1)
      if b ~= 0 and b ~= 1 then -- not a replay record nor a field of the library's own
        held[f] = true
        local l, since = labels(f)
        hold(f, all[i + 1], '', pttl, fields[l], fields[since])
      end
    end
  end
else
  local live = redis.call('zrangebyscore', L, '(' .. t, '+inf', 'WITHSCORES')
  if got[3] then
    -- a lone hold: its lease is the hash's expiry, and the leases have no entry (see leases.lua)
    local ms = redis.call('pttl', H)
    live = {}
    if ms > 0 then
      live = {got[3], t + ms}
    end
  end
  for i = 1, #live, 2 do
    local f = live[i]
    local v = redis.call('hmget', H, f, labels(f))
    if v[1] then
      local owner, mode = f, ''
      if family == 'rw' then
        owner, mode = string.sub(f, 3), modes[string.sub(f, 1, 1)] or ''
      end
      held[f] = true
      hold(owner, v[1], mode, tonumber(live[i + 1]) - t, v[2], v[3])
    end
  end
end

if kind == 'rw_mutex' then
  -- waiting writers (writer preference): the ones new readers wait behind
  local writers = redis.call('zrangebyscore', W, '(' .. t, '+inf', 'WITHSCORES')
  for i = 1, #writers, 2 do
    local n = #waiters
    -- its member is its owner, and its label after a \1 (see writerMember in rw.lua)
    local owner, label = string.match(writers[i], '^([^\1]*)\1?(.*)$')
    waiters[n + 1], waiters[n + 2], waiters[n + 3], waiters[n + 4] = owner, 'write', 0, tonumber(writers[i + 1]) - t
    waiters[n + 5] = label
  end
elseif kind ~= 'mutex' then
  local seen = {}
  for _, e in ipairs(redis.call('lrange', Q, 0, -1)) do
    local d = redis.call('zscore', D, e)
    local addr, _, _, extra, label = splitEntry(e)
    if d and tonumber(d) > t and not seen[e] and not held[addr] then
      seen[e] = true
      local owner, mode, permits = addr, '', 0
      if family == 'rw' then
        owner, mode = string.sub(addr, 3), modes[string.sub(addr, 1, 1)] or ''
      elseif family == 'sem' then
        permits = tonumber(extra) or 0
      end
      local n = #waiters
      waiters[n + 1], waiters[n + 2], waiters[n + 3], waiters[n + 4] = owner, mode, permits, tonumber(d) - t
      waiters[n + 5] = label
    end
  end
end

return {kind, redis.call('get', F) or '0', tonumber(got[2] or '0') or 0, holders, waiters}
