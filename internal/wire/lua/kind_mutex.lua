-- kind_mutex.lua: the hooks of a Mutex (plain or fair) that mutex.lua's functions call; an
-- election defines the same names in kind_election.lua. It comes before mutex.lua in a script:
-- a Lua local is visible only below its definition.

-- KIND is what a Mutex's hash has in its kind field ("\1k"): nothing.
local KIND = ''

-- needsToken reports whether a new hold whose queue entry has extra extra (the caller's
-- fencing flag) takes a token from the fencing counter: '1' says so.
local function needsToken(extra)
  return extra == '1'
end

-- newToken returns the token of a new hold whose entry has extra extra: the fencing counter F
-- incremented, or 0 without fencing. (t, the server's clock if the caller read it, and cur, the
-- counter as read, are the election's.)
local function newToken(F, extra, t, cur)
  return fence(extra == '1' and F, true)
end

-- holdFields returns the fields a new hold writes beside its count: none.
local function holdFields(extra, tok)
end

-- announce tells observers of a new hold with token tok and a lease of lease ms: nobody.
local function announce(tok, lease, extra)
end
