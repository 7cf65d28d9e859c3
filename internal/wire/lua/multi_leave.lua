-- multi_leave.lua: a MultiLock's set that gives up waiting (cancelled, timed out, client
-- closed) leaves the queue of every fair member of a group, and a member left free goes to its
-- queue's next live waiter (see handOver in mutex.lua), as fair_leave.lua does for one waiter.
-- (A set is never granted a member: see multi_acquire.lua.)
-- KEYS[5i-4] lock hash of member i
-- KEYS[5i-3] channel of member i
-- KEYS[5i-2] queue of member i (a fair member's; a plain member's is not touched)
-- KEYS[5i-1] deadlines of member i (likewise)
-- KEYS[5i]   fencing counter of member i (a fair member's next holder's token)
-- ARGV[1] owner id
-- ARGV[2] request id of the waiting call (it makes the set's queue entries)
-- ARGV[3] its label ('' for none; it makes the set's queue entries too)
-- ARGV[i+3] member i, as multi_acquire.lua takes it (only its 'f' counts here)
-- Returns how many queues the set was in. Idempotent. Everything is read before anything is
-- written: a lock of another kind, a key of the wrong type, or a bad fencing counter of a free
-- member, raises or returns an error with nothing changed.
local owner, req = ARGV[1], ARGV[2]
local entry = queueEntry(owner, req, 0, '', ARGV[3])
local ms = {}
for i = 1, #ARGV - 3 do
  local m = member(i, ARGV[i + 3], owner, req, entry)
  ms[i] = m
  if m.fair then
    mustBeKind(m.H, KIND, redis.call('hget', m.H, FIELD_KIND))
    redis.call('llen', m.Q)
    redis.call('zcard', m.D)
    m.free = redis.call('exists', m.H) == 0
    if m.free then
      local bad = counterBad(m.F, '1') -- a grant may need it
      if bad then
        return bad
      end
    end
  end
end

local removed, t = 0, nil
for _, m in ipairs(ms) do
  if m.fair then
    if leaveQueue(m.Q, m.D, entry) then
      removed = removed + 1
    end
    if m.free then
      t = t or now()
      handOver(m.H, m.Q, m.D, m.C, m.F, t)
    end
  end
end
return removed
