-- kind_election.lua: the hooks of an election, a fair Mutex whose hold is a term (see
-- kind_mutex.lua for a Mutex's). It comes before mutex.lua, whose functions call them. The
-- leader record lives in the lock's hash beside the leader's hold: kind "el", the value
-- observers see and the term, written with the hold and gone with it.

-- Every election script that writes takes the same KEYS (wire.Keys.Election): the hash, the
-- lock's channel, the queue, the deadlines, the fencing counter (the last term), and the leader
-- channel, where observers hear of leaders (see ../message.go).
local LEADER = KEYS[6]

-- KIND is what an election's hash has in its kind field ("\1k").
local KIND = 'el'

-- needsToken: a new leader always takes a term.
local function needsToken(extra)
  return true
end

-- newToken returns the term of a new leader and stores it in counter F: the counter plus one
-- or the server's clock t in milliseconds (read if nil), whichever is larger, so terms rise
-- while the counter lives and stay above the terms of a lost counter as long as the servers'
-- clocks agree to within the failover's time. cur: the counter as the caller read and checked
-- it (see counterBad; false: none).
local function newToken(F, extra, t, cur)
  t = t or now()
  if cur and tonumber(cur) >= t then
    return redis.call('incr', F)
  end
  redis.call('set', F, t)
  return t
end

-- holdFields returns the leader record a new leader with value value and term term writes
-- beside its hold.
local function holdFields(value, term)
  return FIELD_KIND, KIND, FIELD_VALUE, value, FIELD_TERM, term
end

-- leaderMessage is the message on the leader channel of kind what ('leader' or 'proclaim')
-- for term term, with the leader's lease (ms from when the script ran) and value.
local function leaderMessage(what, term, lease, value)
  return string.format('%s %d %d ', what, term, lease) .. value
end

-- announce tells observers of a new leader with term term, a lease of lease ms and value value.
local function announce(term, lease, value)
  redis.call(PUBLISH, LEADER, leaderMessage('leader', term, lease, value))
end

-- vacate tells observers that nobody leads after term term.
local function vacate(term)
  redis.call(PUBLISH, LEADER, string.format('vacant %d', term))
end
