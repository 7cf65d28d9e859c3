-- el_campaign.lua: one attempt of a candidate to lead an election, a fair Mutex whose hold is a
-- term: it leads when the election is free and nobody waits, or when it heads the queue once
-- purged; otherwise it waits its turn in the queue. A release that hands the election to the
-- candidate (el_resign.lua, el_leave.lua, el_forceunlock.lua) makes it the leader itself, with
-- "\1g" naming it, and its next attempt finds it so. Every Campaign call is a candidate of its
-- own whose id is the call's request id: it is never re-entered and writes no replay record
-- (any hold of it is the call's, see readHold).
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] queue, KEYS[4] deadlines,
-- KEYS[5] fencing counter (the last term), KEYS[6] leader channel (as every election script
--         that writes: see kind_election.lua)
-- ARGV[1] candidate id: the Campaign call's request id (its first 12 bytes: the client)
-- ARGV[2] lease in milliseconds
-- ARGV[3] mode: 'take' to lead or wait; 'resolve' changes nothing and reports whether the
--         candidate leads (acquired) or not ({0, -2, 0}), after a lost reply
-- ARGV[4] FairWaitTimeout in milliseconds: a candidate's deadline is its last call plus this
-- ARGV[5] 'wait' to join the queue (or refresh the candidate's deadline there), 'try' never to
--         join
-- ARGV[6] claim in milliseconds: the lease a release that hands the election to this candidate
--         gives it (the leader extends it once it has it), '0' to be woken instead
-- ARGV[7] value: what observers see while the candidate leads (the caller bounds its size); the
--         candidate's queue entry keeps it, so a release that hands over can write it
-- ARGV[8] label of the term and of the wait (optional; '' or none: unlabelled): see labelHold in
--         lib.lua, and queueEntry in queue.lua (a term handed over gets its entry's label)
-- Returns {1, 1, term} when the candidate took the lead (in 'take' mode again after a lost
-- reply: its lease extended, never shortened), {1, 1, term, pttl} when a release handed it
-- over (the lease is left as the grant made it; pttl >= 1), or {0, pttl, head, joined} when
-- not, as fair_acquire.lua. A new leader's hash has its hold (count 1), the kind "el", its
-- value and its term (see kind_election.lua), and "leader <term> <lease ms> <value>" goes out
-- on the leader channel in the same script. A hash of another kind raises WRONGTYPE; everything
-- is read before anything is written.
local cand, mode = ARGV[1], ARGV[3]
local a = {H = KEYS[1], Q = KEYS[3], D = KEYS[4], F = KEYS[5], owner = cand, req = cand,
  entry = queueEntry(cand, cand, ARGV[6], ARGV[7], ARGV[8]), extra = ARGV[7], lease = ARGV[2]}

local what, x, head, cur = fairRead(a.H, a.Q, a.F, cand, cand, a.extra, mode) -- see mutex.lua
if what == 'free' then
  local term = takeFair(a, false, nil, x)
  labelHold(a.H, cand, ARGV[8])
  return {1, 1, term}
elseif what == 'bad' then
  return x
elseif what == 'none' then
  return {0, -2, 0}
elseif what == 'grant' then
  local term = tonumber(redis.call('hget', a.H, FIELD_TERM))
  -- in its last millisecond PTTL is 0: still a claim, of under 1 ms (never "no claim")
  local left = redis.call('pttl', a.H)
  if left == 0 then
    left = 1
  end
  return {1, 1, term, left}
elseif what ~= 'wait' then
  -- 'ran' ('held' cannot be: a candidate made for the call holds nothing else)
  local term = tonumber(redis.call('hget', a.H, FIELD_TERM))
  if mode ~= 'resolve' then
    extend(a.H, ARGV[2])
  end
  return {1, 1, term}
end
local r = queueFair(a, tonumber(ARGV[4]), ARGV[5] == 'wait', x, head, cur)
if r[1] == 1 then
  labelHold(a.H, cand, ARGV[8])
end
return r
