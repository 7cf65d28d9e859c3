-- el_leave.lua: a candidate that gives up (its Campaign call cancelled, timed out, or the
-- client closed) leaves the queue; the lead it has, taken or handed to it, whether or not it
-- learned of it, is given back and handed to the next live candidate (or observers hear
-- "vacant <term>"), and a free election goes to the queue's live head (see mutex.lua
-- handOver). It must run only for a Campaign call that returns an error: any hold of its
-- candidate is that call's.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines,
-- KEYS[5] fencing counter (the last term), KEYS[6] leader channel (see el_campaign.lua)
-- ARGV[1] candidate id
-- ARGV[2] its claim, ARGV[3] its value, ARGV[4] its label (optional) (as el_campaign.lua took
--         them: they make its entry)
-- Returns 1 when the candidate was queued or led, 0 when not. Idempotent. A hash of another
-- kind, a key of the wrong type or a bad fencing counter raises, or returns an error, with
-- nothing changed: everything is read before anything is written.
local H, C, Q, D, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local cand = ARGV[1]
local held = redis.call('hmget', H, cand, FIELD_TERM, FIELD_KIND)
mustBeKind(H, KIND, held[3])
redis.call('llen', Q)
redis.call('zcard', D)
-- it hands over when it led, or when nobody leads: the next leader needs a term
local handing = held[1] or redis.call('exists', H) == 0
if handing then
  local bad = counterBad(F, '')
  if bad then
    return bad
  end
end
local removed = leaveQueue(Q, D, queueEntry(cand, cand, ARGV[2], ARGV[3], ARGV[4]))
if handing then
  local _, granted = handOver(H, Q, D, C, F, now())
  if held[1] then
    if not granted then
      vacate(held[2])
    end
    return 1
  end
end
if removed then
  return 1
end
return 0
