package rlock

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
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

// compose joins files, a newline after each, into a script.
func compose(readOnly bool, files ...string) luaScript {
	parts := make([]string, len(files))
	for i, f := range files {
		parts[i] = luaSource(f)
	}
	if !strings.Contains(parts[0], classicPublish) || !strings.Contains(parts[0], graceLine0) {
		panic("rlock: lib.lua does not define PUBLISH and GRACE")
	}
	src := strings.Join(parts, "\n")
	sources[files[len(files)-1]] = src
	return luaScript{classic: variant(src, readOnly), sharded: variant(strings.Replace(src, classicPublish, shardedPublish, 1), readOnly)}
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

// Scripts of Mutex and fair Mutex (mutex.go, fairlock.go).
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
