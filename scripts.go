package rlock

import (
	_ "embed"

	"github.com/redis/rueidis"
)

// The scripts are immutable after package initialisation; each file states its KEYS, ARGV and
// replies. rueidis runs them with EVALSHA and falls back to EVAL on NOSCRIPT.
var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/renew.lua
	renewSrc string
	//go:embed lua/forceunlock.lua
	forceUnlockSrc string
	//go:embed lua/inspect.lua
	inspectSrc string
	//go:embed lua/fair_acquire.lua
	fairAcquireSrc string
	//go:embed lua/fair_leave.lua
	fairLeaveSrc string

	acquireScript     = rueidis.NewLuaScript(acquireSrc)
	releaseScript     = rueidis.NewLuaScript(releaseSrc)
	renewScript       = rueidis.NewLuaScript(renewSrc)
	forceUnlockScript = rueidis.NewLuaScript(forceUnlockSrc)
	inspectScript     = rueidis.NewLuaScriptReadOnly(inspectSrc)

	fairAcquireScript = rueidis.NewLuaScript(fairAcquireSrc)
	fairLeaveScript   = rueidis.NewLuaScript(fairLeaveSrc)
)
