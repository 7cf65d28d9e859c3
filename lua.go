package rlock

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/redis/rueidis"
)

// Every script is lua/lib.lua (helpers shared by all), a newline, and its own file, which
// states its KEYS, ARGV and replies; the scripts of kinds whose waiters queue have
// lua/queue.lua between the two, and those of kinds with per-hold leases lua/leases.lua after
// that. rueidis runs them with EVALSHA and falls back to EVAL on
// NOSCRIPT. They are immutable after package initialisation.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// luaScript is one script in two variants: classic pub/sub, and sharded pub/sub for a Redis
// Cluster (its wake-ups use SPUBLISH, which keeps them on the lock's shard).
type luaScript struct{ classic, sharded luaVariant }

// luaVariant is one variant of a script, with its source and SHA-1 for commands that rueidis'
// Lua type does not send (pipelines, dedicated connections).
type luaVariant struct {
	*rueidis.Lua
	src, sha string
	readOnly bool
}

// on returns the variant for c's deployment (and c's Options.RestartGrace, if set).
func (s luaScript) on(c *Client) luaVariant {
	v := s.classic
	if c.sharded {
		v = s.sharded
	}
	if c.graceLine != "" {
		return c.graced(v)
	}
	return v
}

// graceLine0 is how lib.lua's GRACE line reads; a client with Options.RestartGrace runs every
// script with it replaced by its graceLine.
const graceLine0 = "local GRACE = 0\n"

// graced returns v with c's RestartGrace, made once per client.
func (c *Client) graced(v luaVariant) luaVariant {
	if g, ok := c.gracedScripts.Load(v.sha); ok {
		return g.(luaVariant)
	}
	g, _ := c.gracedScripts.LoadOrStore(v.sha, variant(strings.Replace(v.src, graceLine0, c.graceLine, 1), v.readOnly))
	return g.(luaVariant)
}

// How lib.lua's PUBLISH line reads, and how it reads in the sharded variant.
const (
	classicPublish = "local PUBLISH = 'publish'\n"
	shardedPublish = "local PUBLISH = 'spublish'\n"
)

// script returns the script of lua/<file>, prefixed with lib.lua; readOnly scripts run with
// EVALSHA_RO.
func script(file string, readOnly bool) luaScript { return compose(readOnly, "lib.lua", file) }

// queuedScript returns the script of lua/<file> of a fair Mutex, prefixed with lib.lua and
// queue.lua.
func queuedScript(file string) luaScript { return compose(false, "lib.lua", "queue.lua", file) }

// leasedScript returns the script of lua/<file> of a kind with per-hold leases and a queue,
// prefixed with lib.lua, queue.lua and leases.lua.
func leasedScript(file string) luaScript {
	return compose(false, "lib.lua", "queue.lua", "leases.lua", file)
}

// sources maps each script's file to the classic variant's source, as Redis gets it (for the
// fault tests, which match scripts on the wire); filled during package initialisation.
var sources = make(map[string]string)

// compose joins files, a newline after each, into a script; of the helper files (all but the
// last) it keeps only the functions the script uses (see prune).
func compose(readOnly bool, files ...string) luaScript {
	parts := make([]string, len(files))
	for i, f := range files {
		parts[i] = luaSource(f)
	}
	prune(parts)
	if !strings.Contains(parts[0], classicPublish) || !strings.Contains(parts[0], graceLine0) {
		panic("rlock: lib.lua does not define PUBLISH and GRACE")
	}
	src := strings.Join(parts, "\n")
	sources[files[len(files)-1]] = src
	return luaScript{classic: variant(src, readOnly), sharded: variant(strings.Replace(src, classicPublish, shardedPublish, 1), readOnly)}
}

// Exec runs the script on c with EVALSHA, and EVAL on NOSCRIPT, and returns its reply. A
// read-only script's commands (EVALSHA_RO, EVAL_RO) are retryable, and rueidis (v1.0.79) puts
// a retried command back in its pool while a broken connection's writer may still read it (a
// data race, seen after a server restart); they are pinned, so never reused.
func (v luaVariant) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	if !v.readOnly {
		return v.Lua.Exec(ctx, c, keys, args)
	}
	res := c.Do(ctx, c.B().EvalshaRo().Sha1(v.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build().Pin())
	if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
		res = c.Do(ctx, c.B().EvalRo().Script(v.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build().Pin())
	}
	return res
}

func variant(src string, readOnly bool) luaVariant {
	mk := rueidis.NewLuaScript
	if readOnly {
		mk = rueidis.NewLuaScriptReadOnly
	}
	sum := sha1.Sum([]byte(src))
	return luaVariant{Lua: mk(src), src: src, sha: hex.EncodeToString(sum[:]), readOnly: readOnly}
}

func luaSource(file string) string {
	b, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		panic("rlock: missing script " + file)
	}
	return string(b)
}

// Scripts of Mutex and fair Mutex (mutex.go, fairmutex.go).
var (
	acquireScript     = script("acquire.lua", false)
	releaseScript     = script("release.lua", false)
	renewScript       = script("renew.lua", false)
	forceUnlockScript = queuedScript("forceunlock.lua")
	inspectScript     = script("inspect.lua", true)
	fairAcquireScript = queuedScript("fair_acquire.lua")
	fairReleaseScript = queuedScript("fair_release.lua")
	fairLeaveScript   = queuedScript("fair_leave.lua")
)

// Scripts of RWMutex (rwmutex.go).
var (
	rwAcquireScript     = leasedScript("rw_acquire.lua")
	rwReleaseScript     = leasedScript("rw_release.lua")
	rwLeaveScript       = leasedScript("rw_leave.lua")
	rwRenewScript       = leasedScript("rw_renew.lua")
	rwInspectScript     = script("rw_inspect.lua", false)
	rwForceUnlockScript = leasedScript("rw_forceunlock.lua")
)

// Scripts of Semaphore (semaphore.go).
var (
	semAcquireScript = leasedScript("sem_acquire.lua")
	semReleaseScript = leasedScript("sem_release.lua")
	semLeaveScript   = leasedScript("sem_leave.lua")
	semRenewScript   = leasedScript("sem_renew.lua")
	semInspectScript = script("sem_inspect.lua", false)
	semForceScript   = leasedScript("sem_forcerelease.lua")
)

// stateScript reads the State of a lock of any kind (state.go); read-only, so it also runs on
// a replica. It needs queue.lua's splitEntry.
var stateScript = compose(true, "lib.lua", "queue.lua", "state.lua")

// checkScript reports which holds still exist, after a restart or failover (notice.go).
var checkScript = script("check.lua", true)

// A helper function in a helper file: the comment lines right above "local function <name>(",
// that line, and the lines up to the first "end" at the start of a line.
var helperStart = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)

// helper is one helper function's lines in a helper file.
type helper struct {
	name       string
	file       int // index in the parts given to prune
	from, upto int // its lines (comments above it included): [from, upto)
}

// prune drops from the helper files, parts[:len(parts)-1], the helper functions that the
// script (the last part) does not call, directly or through a helper it keeps. Every helper
// is created anew on each run of a script, so one that a script never calls is work Redis
// does for nothing. Comment lines do not count; a name in a comment at the end of a line of
// code keeps its helper: keeping one too many costs a little, dropping one used would break
// the script.
func prune(parts []string) {
	lines := make([][]string, len(parts))
	var helpers []helper
	for i := range parts[:len(parts)-1] {
		lines[i] = strings.Split(parts[i], "\n")
		for j := 0; j < len(lines[i]); j++ {
			m := helperStart.FindStringSubmatch(lines[i][j])
			if m == nil {
				continue
			}
			h := helper{name: m[1], file: i, from: j}
			for h.from > 0 && strings.HasPrefix(lines[i][h.from-1], "--") {
				h.from--
			}
			for j < len(lines[i]) && lines[i][j] != "end" {
				j++
			}
			if j == len(lines[i]) {
				panic("rlock: helper " + m[1] + " has no end")
			}
			h.upto = j + 1
			helpers = append(helpers, h)
		}
	}
	body := func(h helper) string { return code(lines[h.file][h.from:h.upto]) }
	keep := make([]bool, len(helpers))
	used := []string{code(strings.Split(parts[len(parts)-1], "\n"))}
	for len(used) > 0 {
		text := used[len(used)-1]
		used = used[:len(used)-1]
		for k, h := range helpers {
			if !keep[k] && mentions(text, h.name) {
				keep[k] = true
				used = append(used, body(h))
			}
		}
	}
	for k := len(helpers) - 1; k >= 0; k-- {
		if h := helpers[k]; !keep[k] {
			f := lines[h.file]
			lines[h.file] = append(f[:h.from:h.from], f[h.upto:]...)
		}
	}
	for i := range parts[:len(parts)-1] {
		parts[i] = strings.Join(lines[i], "\n")
	}
}

// code returns Lua lines without their comment lines.
func code(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// mentions reports whether Lua text has name as a whole word.
func mentions(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		if (j == 0 || !isWordByte(text[j-1])) && (end == len(text) || !isWordByte(text[end])) {
			return true
		}
		i = end
	}
}

func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}
