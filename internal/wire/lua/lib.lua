-- lib.lua: helpers every script shares. Each script Redis runs is this file, a newline, and the
-- script's own file, with the preludes of its kind between them (queue.lua for the queued
-- kinds; kind_mutex.lua or kind_election.lua and mutex.lua for a Mutex, a MultiLock and an
-- election; leases.lua and rw.lua or sem.lua for RWMutex and Semaphore; see scripts.go). Every
-- function here is made anew on each run (about 0.03 us each), so only what several scripts
-- need belongs here, and composition drops those a script does not call.

-- The special fields of a lock's hash, the only place the scripts spell them; what each holds
-- is in fields.go. Hold fields never start with a control character, so they cannot clash.
local FIELD_KIND, FIELD_GRANT, FIELD_WRITER, FIELD_PERMITS, FIELD_USED = '\1k', '\1g', '\1w', '\1p', '\1u'
local FIELD_VALUE, FIELD_TERM = '\1v', '\1t' -- an election's leader record
local FIELD_LONE = '\1o' -- RWMutex, Semaphore: the lone hold whose lease is the hash's expiry
local FIELD_LABEL, FIELD_SINCE = '\1l', '\1s' -- + a hold's field: its label, when it began

-- PUBLISH publishes wake-ups on a lock's channel. On a Redis Cluster the scripts run with
-- 'spublish' instead (sharded pub/sub: the message stays on the shard that owns the lock).
local PUBLISH = 'publish'

-- GRACE is Options.RestartGrace in milliseconds: a server up for less than that grants no new
-- hold. A client with a grace runs the scripts with this line changed (see Variant.WithGrace).
local GRACE = 0

-- graceLeft returns how many milliseconds this server must still be up before it may grant a
-- new hold (0: none). INFO's uptime is the difference of two whole-second clock readings (the
-- start and now), up to a second more than the time really passed: the grace counts from a
-- second later, so it never ends early, and a caller that waits this long finds it over.
local function graceLeft()
  if GRACE == 0 then
    return 0
  end
  local up = tonumber(string.match(redis.call('info', 'server'), 'uptime_in_seconds:(%d+)'))
  return math.max(GRACE + 1000 - up * 1000, 0)
end

-- now returns the server's clock in milliseconds: every deadline and lease end is in it.
local function now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- labelHold labels the hold in field f of hash H (WithLabel), unless it is labelled already:
-- FIELD_LABEL .. f is label, FIELD_SINCE .. f the server time (ms) the labelled hold began;
-- re-entries keep both. An unlabelled hold (label '' or nil) writes nothing. The fields go with
-- the hold (see labels).
local function labelHold(H, f, label)
  if label and label ~= '' and redis.call('hsetnx', H, FIELD_LABEL .. f, label) == 1 then
    redis.call('hset', H, FIELD_SINCE .. f, now())
  end
end

-- labels returns the label fields of the hold in field f, for the HDEL that ends the hold.
local function labels(f)
  return FIELD_LABEL .. f, FIELD_SINCE .. f
end

-- marker is the hash field recording the last request of req's client (its first 12 bytes)
-- for owner, as "<request id>:<count>".
local function marker(req, owner)
  return '\0' .. string.sub(req, 1, 12) .. owner
end

-- recorded returns the count that record rec (a marker's value, or nil) holds for request req,
-- or nil when rec is another request's.
local function recorded(rec, req)
  if rec then
    local id, n = string.match(rec, '^(.*):(%d+)$')
    if id == req then
      return tonumber(n)
    end
  end
  return nil
end

-- Kinds of lock. A Mutex's hash has no kind field; the others' have "\1k" = their kind. A
-- script given a hash of another kind raises WRONGTYPE and changes nothing, so locks of
-- different kinds on one name fail instead of excluding nobody.
local function mustBeKind(H, want, got)
  if (got or '') ~= want and (want == '' or redis.call('exists', H) == 1) then
    error({err = 'WRONGTYPE the key holds a lock of another kind'})
  end
end

-- keepFor makes key K live at least ms more, never less than it did: an expiry is never
-- shortened (a lease another hold of the owner set, a waiter's place with a longer
-- FairWaitTimeout). A key the caller knows it just made (fresh) has no expiry yet and gets one
-- in one call; otherwise PEXPIRE GT does it in one call when it extends (the usual case), and
-- since GT takes a key without expiry (one edited) for one that lives forever, PTTL tells that
-- case apart when GT changed nothing.
local function keepFor(K, ms, fresh)
  if fresh then
    redis.call('pexpire', K, ms)
  elseif redis.call('pexpire', K, ms, 'GT') == 0 and redis.call('pttl', K) == -1 then
    redis.call('pexpire', K, ms)
  end
end

-- record stores the outcome (count) of request req of owner, unless the owner was made for it.
local function record(key, owner, req, count)
  if owner ~= req then
    redis.call('hset', key, marker(req, owner), req .. ':' .. count)
  end
end

-- MAX_TOKEN is 2^53: Lua's numbers (doubles) keep every integer up to it exact, and none above
-- all. A fencing counter past it is refused (badCounter), and one at it gives no new token
-- (counterError, counterFull).
local MAX_TOKEN = '9007199254740992'

-- badCounter reports whether fencing counter value v (or nil) is not an integer from -2^53 to
-- 2^53 written as Redis writes integers (no '+', no leading zero).
local function badCounter(v)
  if not v then
    return false
  end
  local digits = string.match(v, '^%-?([1-9]%d*)$')
  if v == '0' then
    return false
  end
  return not digits or #digits > 16 or (#digits == 16 and digits > MAX_TOKEN)
end

-- counterFull returns the error reply for a new token from a counter at 2^53.
local function counterFull()
  return redis.error_reply('ERR fencing counter reached 2^53: no exact token is left')
end

-- counterError returns the error reply for fencing counter key (false: none) when its value is
-- bad (see badCounter) or, when a new token is to be taken from it (new), when it reached 2^53;
-- else nil. Scripts call it before they write anything.
local function counterError(key, new)
  if not key then
    return nil
  end
  local v = redis.call('get', key)
  if badCounter(v) then
    return redis.error_reply('ERR fencing counter is not an integer or out of range')
  end
  if new and v == MAX_TOKEN then
    return counterFull()
  end
  return nil
end

-- fence returns the fencing counter at key: incremented for a new hold (new true; the caller
-- made sure the counter is below 2^53, see counterError), read otherwise (a bad counter raises
-- an error: callers read before they write); 0 without a key name.
local function fence(key, new)
  if not key then
    return 0
  end
  if new then
    return redis.call('incr', key)
  end
  local v = redis.call('get', key) or '0'
  if badCounter(v) then
    error({err = 'ERR fencing counter is not an integer or out of range'})
  end
  return tonumber(v)
end
