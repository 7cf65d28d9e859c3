package wire

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// Every script is lua/lib.lua (helpers shared by all), a newline, and its own file, which
// states its KEYS, ARGV and replies; the scripts of kinds whose waiters queue have
// lua/queue.lua between the two; those of a Mutex, a MultiLock and an election then their
// kind's hooks (lua/kind_mutex.lua, lua/kind_election.lua) and the logic of one Mutex that
// they share (lua/mutex.lua); those of kinds with per-hold leases lua/leases.lua after
// queue.lua, then their kind's helpers (lua/rw.lua, lua/sem.lua). rueidis runs them with
// EVALSHA and falls back to EVAL on NOSCRIPT. They are immutable after package
// initialisation.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// Script is one script in two variants: classic pub/sub, and sharded pub/sub for a Redis
// Cluster (its wake-ups use SPUBLISH, which keeps them on the lock's shard), and the array
// its fast path's integer reply stands for. It is comparable.
type Script struct {
	classic, sharded Variant
	fast             fastReply
}

// fastReply is the array a script's fast path answers as an integer n: Redis answers a Lua
// table through a deferred-length reply and a check of its err, ok, double, map and set
// fields, about 1 µs more per call than an integer (issue 28: 2 µs of a Mutex's 17 µs of
// server work per uncontended lock+unlock, measured with bench/cmd/uncost).
type fastReply uint8

const (
	noFast        fastReply = iota // no integer replies
	fastAcquired                   // 1: {1, 1, 0}, a free lock taken
	fastReleased                   // n: {0, n}, released, n clients woken
	fastReleased3                  // n: {0, n, 0}, released, n clients woken (rw_release.lua)
)

// withFast returns s whose fast path answers f's integer.
func (s Script) withFast(f fastReply) Script {
	s.fast = f
	return s
}

// Ints returns res, a reply of s, as its integer array, its fast path's integer reply as the
// array that integer stands for (see fastReply).
func (s Script) Ints(res rueidis.RedisResult) ([]int64, error) {
	if s.fast != noFast {
		if m, err := res.ToMessage(); err == nil && m.IsInt64() {
			n, _ := m.AsInt64()
			switch {
			case s.fast == fastAcquired && n == 1:
				return []int64{1, 1, 0}, nil
			case s.fast == fastReleased:
				return []int64{0, n}, nil
			case s.fast == fastReleased3:
				return []int64{0, n, 0}, nil
			}
			return nil, fmt.Errorf("wire: unexpected integer reply %d", n)
		}
	}
	return res.AsIntSlice()
}

// For returns the sharded variant if sharded, else the classic one.
func (s Script) For(sharded bool) Variant {
	if sharded {
		return s.sharded
	}
	return s.classic
}

// Variant is one variant of a script, with its source and SHA-1 for commands that rueidis'
// Lua type does not send (pipelines, dedicated connections). It is comparable.
type Variant struct {
	lua      *rueidis.Lua
	src, sha string
	readOnly bool
}

// Source returns the variant's source, as Redis gets it.
func (v Variant) Source() string { return v.src }

// SHA1 returns the hex SHA-1 of the variant's source, as EVALSHA takes it.
func (v Variant) SHA1() string { return v.sha }

// graceLine0 is how lib.lua's GRACE line reads; a client with Options.RestartGrace runs every
// script with it replaced (see WithGrace).
const graceLine0 = "local GRACE = 0\n"

// WithGrace returns v for a client with Options.RestartGrace of ms milliseconds: lib.lua's
// GRACE line set to it. It makes a new rueidis script; callers cache the result.
func (v Variant) WithGrace(ms int64) Variant {
	return variant(strings.Replace(v.src, graceLine0, "local GRACE = "+strconv.FormatInt(ms, 10)+"\n", 1), v.readOnly)
}

// How lib.lua's PUBLISH line reads, and how it reads in the sharded variant.
const (
	classicPublish = "local PUBLISH = 'publish'\n"
	shardedPublish = "local PUBLISH = 'spublish'\n"
)

// Exec runs the script on c with EVALSHA, and EVAL on NOSCRIPT, and returns its reply. A
// read-only script's commands (EVALSHA_RO, EVAL_RO) are retryable, and rueidis (v1.0.79) puts
// a retried command back in its pool while a broken connection's writer may still read it (a
// data race, seen after a server restart); they are pinned, so never reused.
func (v Variant) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	if !v.readOnly {
		return v.lua.Exec(ctx, c, keys, args)
	}
	res := c.Do(ctx, c.B().EvalshaRo().Sha1(v.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build().Pin())
	if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
		res = c.Do(ctx, c.B().EvalRo().Script(v.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build().Pin())
	}
	return res
}

// ExecOn runs the script on the dedicated connection d (EVALSHA, and EVAL on NOSCRIPT), so
// that a WAIT after it on d counts its writes.
func (v Variant) ExecOn(ctx context.Context, d rueidis.DedicatedClient, keys, args []string) rueidis.RedisResult {
	res := d.Do(ctx, d.B().Evalsha().Sha1(v.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
		res = d.Do(ctx, d.B().Eval().Script(v.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	return res
}

// EvalSHA builds the EVALSHA command of the script, for a pipeline; a NOSCRIPT reply means the
// node lacks the script (SCRIPT LOAD its Source there, then send it again).
func (v Variant) EvalSHA(b rueidis.Builder, keys, args []string) rueidis.Completed {
	return b.Evalsha().Sha1(v.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func variant(src string, readOnly bool) Variant {
	mk := rueidis.NewLuaScript
	if readOnly {
		mk = rueidis.NewLuaScriptReadOnly
	}
	sum := sha1.Sum([]byte(src))
	return Variant{lua: mk(src), src: src, sha: hex.EncodeToString(sum[:]), readOnly: readOnly}
}

// script returns the script of lua/<file>, prefixed with lib.lua; readOnly scripts run with
// EVALSHA_RO.
func script(file string, readOnly bool) Script { return compose(readOnly, "lib.lua", file) }

// queuedScript returns the script of lua/<file>, prefixed with lib.lua and queue.lua.
func queuedScript(file string) Script { return compose(false, "lib.lua", "queue.lua", file) }

// mutexScript returns the script of lua/<file> of a Mutex (plain or fair) or a MultiLock,
// prefixed with lib.lua, queue.lua, kind_mutex.lua (a Mutex's hooks) and mutex.lua (the logic
// of one Mutex).
func mutexScript(file string) Script {
	return compose(false, "lib.lua", "queue.lua", "kind_mutex.lua", "mutex.lua", file)
}

// electionScript returns the script of lua/<file> of an election, prefixed with lib.lua,
// queue.lua, kind_election.lua (an election's hooks) and mutex.lua (the logic of one Mutex,
// which an election is); readOnly scripts run with EVALSHA_RO.
func electionScript(file string, readOnly bool) Script {
	return compose(readOnly, "lib.lua", "queue.lua", "kind_election.lua", "mutex.lua", file)
}

// rwScript returns the script of lua/<file> of an RWMutex, prefixed with lib.lua, queue.lua,
// leases.lua (per-hold leases) and rw.lua (the RWMutex scripts' helpers).
func rwScript(file string) Script {
	return compose(false, "lib.lua", "queue.lua", "leases.lua", "rw.lua", file)
}

// semScript returns the script of lua/<file> of a Semaphore, prefixed with lib.lua, queue.lua,
// leases.lua (per-hold leases) and sem.lua (the Semaphore scripts' helpers).
func semScript(file string) Script {
	return compose(false, "lib.lua", "queue.lua", "leases.lua", "sem.lua", file)
}

// sources maps each script's file to the classic variant's source, as Redis gets it (for the
// fault tests, which match scripts on the wire); filled during package initialisation.
var sources = make(map[string]string)

// Source returns the source Redis gets for lua/<file> (classic pub/sub), preludes included,
// or "" for no such script.
func Source(file string) string { return sources[file] }

// ShardedSource is Source of the variant for sharded pub/sub (a cluster's).
func ShardedSource(file string) string {
	return strings.Replace(sources[file], classicPublish, shardedPublish, 1)
}

// Files lists the files under lua/ that are scripts (not preludes).
func Files() []string {
	files := make([]string, 0, len(sources))
	for f := range sources {
		files = append(files, f)
	}
	return files
}

// A script's fast path: the lines of its file from fastStart to fastEnd. compose moves them
// to right after lib.lua's GRACE line, before any helper is defined: Redis makes every helper
// anew on each run of a script (a closure each), and an uncontended call that returns from
// its fast path then pays for none (issue 28: about a quarter of a Mutex's lock+unlock time
// inside Redis). A fast path uses only redis.call, Lua's own functions and lib.lua's
// constants (FIELD_*, PUBLISH, GRACE), and leaves what it read in locals of its own for the
// script's body.
const (
	fastStart = "-- fast path {\n"
	fastEnd   = "-- } fast path\n"
)

// cutFast returns src without its fast path, and the fast path ("" for none).
func cutFast(src string) (rest, fast string) {
	i := strings.Index(src, fastStart)
	if i < 0 {
		return src, ""
	}
	j := strings.Index(src[i:], fastEnd)
	if j < 0 {
		panic("wire: a fast path without its end")
	}
	j += i + len(fastEnd)
	return src[:i] + src[j:], src[i:j]
}

// compose joins files, a newline after each, into a script; of the helper files (all but the
// last) it keeps only the functions the script uses (see prune). The script's fast path, if it
// has one, comes first of all but lib.lua's constants (see fastStart).
func compose(readOnly bool, files ...string) Script {
	parts := make([]string, len(files))
	for i, f := range files {
		parts[i] = luaSource(f)
	}
	var fast string
	parts[len(parts)-1], fast = cutFast(parts[len(parts)-1])
	prune(parts)
	if !strings.Contains(parts[0], classicPublish) || !strings.Contains(parts[0], graceLine0) {
		panic("wire: lib.lua does not define PUBLISH and GRACE")
	}
	parts[0] = strings.Replace(parts[0], graceLine0, graceLine0+fast, 1)
	src := strings.Join(parts, "\n")
	sources[files[len(files)-1]] = src
	return Script{classic: variant(src, readOnly), sharded: variant(strings.Replace(src, classicPublish, shardedPublish, 1), readOnly)}
}

func luaSource(file string) string {
	b, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		panic("wire: missing script " + file)
	}
	return string(b)
}

// Scripts of Mutex and fair Mutex.
var (
	Acquire     = mutexScript("acquire.lua").withFast(fastAcquired)
	Release     = mutexScript("release.lua").withFast(fastReleased)
	Renew       = script("renew.lua", false)
	ForceUnlock = queuedScript("forceunlock.lua")
	Inspect     = script("inspect.lua", true)
	FairAcquire = mutexScript("fair_acquire.lua").withFast(fastAcquired)
	FairRelease = mutexScript("fair_release.lua").withFast(fastReleased)
	FairLeave   = mutexScript("fair_leave.lua")
)

// Scripts of RWMutex.
var (
	RWAcquire     = rwScript("rw_acquire.lua").withFast(fastAcquired)
	RWRelease     = rwScript("rw_release.lua").withFast(fastReleased3)
	RWLeave       = rwScript("rw_leave.lua")
	RWRenew       = rwScript("rw_renew.lua")
	RWInspect     = script("rw_inspect.lua", false)
	RWForceUnlock = rwScript("rw_forceunlock.lua")
)

// Scripts of Semaphore.
var (
	SemAcquire      = semScript("sem_acquire.lua").withFast(fastAcquired)
	SemRelease      = semScript("sem_release.lua").withFast(fastReleased)
	SemLeave        = semScript("sem_leave.lua")
	SemRenew        = semScript("sem_renew.lua")
	SemInspect      = script("sem_inspect.lua", false)
	SemForceRelease = semScript("sem_forcerelease.lua")
)

// Scripts of an election (a fair Mutex whose hold is a term; its renewal is Renew's, its check
// Check's with CheckMutex).
var (
	Campaign            = electionScript("el_campaign.lua", false)
	Resign              = electionScript("el_resign.lua", false)
	Proclaim            = electionScript("el_proclaim.lua", false)
	ElectionLeave       = electionScript("el_leave.lua", false)
	ReadLeader          = electionScript("el_leader.lua", true)
	ElectionForceUnlock = electionScript("el_forceunlock.lua", false)
)

// Scripts of a MultiLock: each takes, releases or leaves every member of one group (members
// whose keys share a hash slot) at once; a member's renewal is its Mutex's.
var (
	MultiAcquire = mutexScript("multi_acquire.lua")
	MultiRelease = mutexScript("multi_release.lua")
	MultiLeave   = mutexScript("multi_leave.lua")
)

// ReadState reads the State of a lock of any kind; read-only, so it also runs on a replica.
// It needs queue.lua's splitEntry.
var ReadState = compose(true, "lib.lua", "queue.lua", "state.lua")

// Check reports which holds still exist, after a restart or failover.
var Check = script("check.lua", true)
