package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/redis/rueidis"
)

// runUnlock is "rlock unlock --force": it deletes the lock NAME whoever holds it (its holders
// learn at their next renewal, and an "rlock exec" holding it stops its CMD) and wakes a
// waiter. It returns 0 if the lock existed, 1 if it did not, 2 on errors.
func runUnlock(args []string, env []string, stdout, stderr io.Writer) int {
	var f redisFlags
	fs := newFlagSet("unlock")
	f.register(fs)
	force := fs.Bool("force", false, "delete the lock whoever holds it")
	pos, rest, err := parseArgs(fs, args, 1)
	if errors.Is(err, flag.ErrHelp) {
		helpFor(stdout, "unlock")
		return 0
	}
	if err == nil {
		err = oneName(fs, pos, rest)
	}
	if err == nil && !*force {
		err = usagef("unlock: needs --force: it releases the lock whoever holds it " +
			"(a holder releases its own lock when its CMD exits)")
	}
	var opt rueidis.ClientOption
	if err == nil {
		opt, err = f.clientOption(fs, env)
	}
	if err != nil {
		return usageFailed(stderr, err)
	}
	name := pos[0]
	s, code := open(opt, &f, stderr, exitError)
	if s == nil {
		return code
	}
	defer s.close()
	existed, err := forceUnlock(s, &f, name)
	if err != nil { // NAME is valid (oneName): a key of another type, or Redis failed
		fmt.Fprintf(stderr, "rlock: unlock --force %q: %v\n", name, err)
		return exitError
	}
	if !existed {
		fmt.Fprintf(stdout, "%s: was not locked\n", name)
		return exitFree
	}
	fmt.Fprintf(stdout, "%s: was locked; deleted\n", name)
	return exitHeld
}

// forceUnlock deletes the lock name with the ForceUnlock of its kind, which it tells from the
// lock's keys as status does: a mutex or a read-write mutex, fair with --fair or when waiters
// queue (the fair kinds' ForceUnlock wakes the queue's head). It reports whether the lock
// existed.
func forceUnlock(s *session, f *redisFlags, name string) (bool, error) {
	st, err := readState(s.rc, f.keyPrefix(), name)
	if err != nil {
		return false, err
	}
	fair := *f
	fair.fair = f.fair || len(st.queue) > 0
	switch st.kind {
	case lockRW:
		return s.rwMutex(&fair, name).ForceUnlock(context.Background())
	case lockSemaphore:
		return forceUnlockSemaphore(s, f, name)
	}
	return s.mutex(&fair, name).ForceUnlock(context.Background())
}

// semForceUnlockScript deletes every hold of a semaphore and wakes the first live waiter.
// The library has no ForceUnlock for semaphores, so this follows the layout that its scripts
// (lua/sem_*.lua) keep: a hash of "\1p" permits, "\1u" permits out and hold id -> permits,
// a sorted set of hold id -> lease end, and a queue of waiting hold ids with their deadlines
// (server ms). Holders find their holds gone at their next renewal. Waiters keep their places;
// the hash stays (with its expiry) while any wait, so their permit count is still checked.
// KEYS[1] hash, KEYS[2] leases, KEYS[3] queue, KEYS[4] deadlines, KEYS[5] channel.
// Returns 1 when a hold was live, 0 when not. Everything is read before anything is written,
// so a key of another type raises WRONGTYPE with nothing changed.
const semForceUnlockScript = `
local H, L, Q, D, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local fields = redis.call('hkeys', H)
redis.call('llen', Q)
redis.call('zcard', D)
local tm = redis.call('time')
local t = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
local held = redis.call('zcount', L, '(' .. t, '+inf') > 0
local dead = redis.call('zrangebyscore', D, '-inf', t)
for i = 1, #dead do
  redis.call('lrem', Q, 0, dead[i])
end
redis.call('zremrangebyscore', D, '-inf', t)
local head = redis.call('lindex', Q, 0)
while head and not redis.call('zscore', D, head) do
  redis.call('lpop', Q)
  head = redis.call('lindex', Q, 0)
end
if head then
  for _, f in ipairs(fields) do
    if string.byte(f, 1) ~= 1 then
      redis.call('hdel', H, f)
    end
  end
  if redis.call('exists', H) == 1 then
    redis.call('hset', H, '\1u', 0)
  end
  redis.call('del', L)
  redis.call('publish', C, '@' .. head)
else
  redis.call('del', H, L, Q, D)
end
if held then
  return 1
end
return 0`

// forceUnlockSemaphore deletes every hold of the semaphore name (see semForceUnlockScript)
// and reports whether one was held.
func forceUnlockSemaphore(s *session, f *redisFlags, name string) (bool, error) {
	key := lockKey(f.keyPrefix(), name)
	n, err := rueidis.NewLuaScript(semForceUnlockScript).Exec(context.Background(), s.rc,
		[]string{key, key + ":leases", key + ":queue", key + ":deadlines", key + ":ch"}, nil).AsInt64()
	if err != nil && strings.Contains(err.Error(), "WRONGTYPE") {
		return false, fmt.Errorf("a key of this lock (%s*) holds a value that is not a lock of rlock", key)
	}
	return n == 1, err
}
