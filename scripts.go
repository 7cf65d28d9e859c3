package rlock

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"

	"github.com/redis/rueidis"
)

// Every script is lua/lib.lua (helpers shared by all), a newline, and its own file, which
// states its KEYS, ARGV and replies. rueidis runs them with EVALSHA and falls back to EVAL on
// NOSCRIPT. They are immutable after package initialisation.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// luaScript is one script in two variants: classic pub/sub, and sharded pub/sub for a Redis
// Cluster (its wake-ups use SPUBLISH, which keeps them on the lock's shard).
type luaScript struct {
	classic, sharded       *rueidis.Lua
	classicSHA, shardedSHA string // SHA-1 of each, for EVALSHA in pipelines
	classicSrc, shardedSrc string
}

// on returns the variant for c's deployment.
func (s luaScript) on(c *Client) *rueidis.Lua {
	if c.sharded {
		return s.sharded
	}
	return s.classic
}

// src returns the source of the variant for c's deployment.
func (s luaScript) src(c *Client) string {
	if c.sharded {
		return s.shardedSrc
	}
	return s.classicSrc
}

// sha returns the SHA-1 of the variant for c's deployment.
func (s luaScript) sha(c *Client) string {
	if c.sharded {
		return s.shardedSHA
	}
	return s.classicSHA
}

// How lib.lua's PUBLISH line reads, and how it reads in the sharded variant.
const (
	classicPublish = "local PUBLISH = 'publish'\n"
	shardedPublish = "local PUBLISH = 'spublish'\n"
)

// script returns the script of lua/<file>, prefixed with lib.lua.
func script(file string, readOnly bool) luaScript {
	lib := luaSource("lib.lua")
	if !strings.Contains(lib, classicPublish) {
		panic("rlock: lib.lua does not define PUBLISH")
	}
	src := lib + "\n" + luaSource(file)
	mk := rueidis.NewLuaScript
	if readOnly {
		mk = rueidis.NewLuaScriptReadOnly
	}
	sharded := strings.Replace(src, classicPublish, shardedPublish, 1)
	return luaScript{classic: mk(src), sharded: mk(sharded), classicSHA: sha1Hex(src), shardedSHA: sha1Hex(sharded),
		classicSrc: src, shardedSrc: sharded}
}

func sha1Hex(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
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
	forceUnlockScript = script("forceunlock.lua", false)
	inspectScript     = script("inspect.lua", true)
	fairAcquireScript = script("fair_acquire.lua", false)
	fairLeaveScript   = script("fair_leave.lua", false)
)

// Scripts of RWMutex (rwmutex.go).
var (
	rwAcquireScript     = script("rw_acquire.lua", false)
	rwReleaseScript     = script("rw_release.lua", false)
	rwLeaveScript       = script("rw_leave.lua", false)
	rwRenewScript       = script("rw_renew.lua", false)
	rwInspectScript     = script("rw_inspect.lua", false)
	rwForceUnlockScript = script("rw_forceunlock.lua", false)
)

// Scripts of Semaphore (semaphore.go).
var (
	semAcquireScript = script("sem_acquire.lua", false)
	semReleaseScript = script("sem_release.lua", false)
	semLeaveScript   = script("sem_leave.lua", false)
	semRenewScript   = script("sem_renew.lua", false)
	semInspectScript = script("sem_inspect.lua", false)
	semForceScript   = script("sem_forcerelease.lua", false)
)
