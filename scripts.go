package rlock

import (
	"embed"

	"github.com/redis/rueidis"
)

// Every script is lua/lib.lua (helpers shared by all), a newline, and its own file, which
// states its KEYS, ARGV and replies. rueidis runs them with EVALSHA and falls back to EVAL on
// NOSCRIPT. They are immutable after package initialisation.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// script returns the script of lua/<file>, prefixed with lib.lua.
func script(file string, readOnly bool) *rueidis.Lua {
	src := luaSource("lib.lua") + "\n" + luaSource(file)
	if readOnly {
		return rueidis.NewLuaScriptReadOnly(src)
	}
	return rueidis.NewLuaScript(src)
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
