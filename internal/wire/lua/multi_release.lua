-- multi_release.lua: give back one hold of a MultiLock's owner on every member of a group (see
-- multi_acquire.lua) in one step. A member whose last hold goes is freed as release.lua frees a
-- plain Mutex (its channel told) or fair_release.lua a fair one (handed to its queue's first
-- live waiter, see handOver in mutex.lua). A repeated request never releases twice: partial
-- releases are recorded as in release.lua.
-- KEYS[5i-4] lock hash of member i
-- KEYS[5i-3] channel of member i
-- KEYS[5i-2] queue of member i (a fair member's; a plain member's is not touched)
-- KEYS[5i-1] deadlines of member i (likewise)
-- KEYS[5i]   fencing counter of member i (a fair member's next holder's token)
-- ARGV[1] owner id
-- ARGV[2] request id of this release (first 12 bytes: the client)
-- ARGV[3] unlock message (the plain members' wake-up, as release.lua's)
-- ARGV[i+3] member i, as multi_acquire.lua takes it (only its 'f' counts here)
-- Returns {left 1, woken 1, ..., left n, woken n}: each member's remaining hold count (-1: the
-- owner held none; a repeat: the count recorded) and the clients its message reached, as
-- release.lua's. Everything is read before anything is written: a lock of another kind, a key
-- of the wrong type, or a bad fencing counter of a fair member that has waiters, raises or
-- returns an error with nothing changed.
local owner, req = ARGV[1], ARGV[2]
local ms = {}
for i = 1, #ARGV - 3 do
  local m = member(i, ARGV[i + 3], owner, req)
  ms[i] = m
  m.count, m.n = releaseRead(m.H, owner, req)
  if m.fair and not m.n and m.count == 1 and redis.call('exists', m.Q, m.D) > 0 then
    -- its last hold goes to a waiter: read what handOver will (its queue, its deadlines and the
    -- counter a grant may need) before anything is written
    m.waiting = true
    redis.call('lindex', m.Q, 0)
    redis.call('zcard', m.D)
    local bad = counterBad(m.F, '1')
    if bad then
      return bad
    end
  end
end

local out, t = {}, nil
for i, m in ipairs(ms) do
  local left, woken = -1, 0
  if m.n then
    left = m.n
  elseif m.count > 1 then
    left = dropHold(m.H, owner, req)
  elseif m.count == 1 then
    left = 0
    if m.waiting then
      t = t or now()
      woken = handOver(m.H, m.Q, m.D, m.C, m.F, t)
    else
      redis.call('del', m.H)
      if not m.fair then
        woken = redis.call(PUBLISH, m.C, ARGV[3])
      end
    end
  end
  out[2 * i - 1], out[2 * i] = left, woken
end
return out
