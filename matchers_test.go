package rlock_test

// Matchers of the requests the fault proxy (redistest.Proxy) acts on: the library's scripts,
// as it runs them, and plain commands.

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptSource returns the source the library runs for lua/<file>, preludes included.
func scriptSource(file string) []byte {
	src := wire.Source(file)
	if src == "" {
		panic("scriptSource: no script " + file)
	}
	return []byte(src)
}

// matchScript returns a matcher for EVALSHA, EVALSHA_RO, EVAL or EVAL_RO of the script in
// lua/<file> (as the library runs it, in either pub/sub variant: see scriptSource) whose KEYS
// include key ("" for any keys). It panics if the file cannot be read.
func matchScript(file, key string) func(cmd []string) bool {
	src := scriptSource(file)
	sums := [][20]byte{sha1.Sum(src), sha1.Sum([]byte(wire.ShardedSource(file)))}
	return func(cmd []string) bool {
		if len(cmd) < 3 {
			return false
		}
		var sum [20]byte
		switch strings.ToUpper(cmd[0]) {
		case "EVALSHA", "EVALSHA_RO":
			if _, err := hex.Decode(sum[:], []byte(cmd[1])); err != nil {
				return false
			}
		case "EVAL", "EVAL_RO":
			sum = sha1.Sum([]byte(cmd[1]))
		default:
			return false
		}
		if !slices.Contains(sums, sum) {
			return false
		}
		if key == "" {
			return true
		}
		n, err := strconv.Atoi(cmd[2])
		if err != nil || n < 0 || 3+n > len(cmd) {
			return false
		}
		return slices.Contains(cmd[3:3+n], key)
	}
}

// matchCommand returns a matcher for commands named name (case-insensitive) whose arguments
// include arg ("" for any).
func matchCommand(name, arg string) func(cmd []string) bool {
	return func(cmd []string) bool {
		return len(cmd) > 0 && strings.EqualFold(cmd[0], name) && (arg == "" || slices.Contains(cmd[1:], arg))
	}
}

// TestMatchers: the matchers pick the requests they name, through a proxy and by hand.
func TestMatchers(t *testing.T) {
	e := newEnv(t)
	p := e.newProxy()
	rc := e.through(p).Rueidis()
	key := func(name string) string { return e.Prefix + ":{proxy}:" + name }
	src := scriptSource("inspect.lua")
	script := rueidis.NewLuaScript(string(src))
	sum := sha1.Sum(src)
	sha := hex.EncodeToString(sum[:])
	k, other := key("script"), key("script-other")

	p.DropReply(matchScript("inspect.lua", k))
	res, err := script.Exec(bg, rc, []string{other}, []string{""}).ToArray()
	require.NoError(t, err, "other keys do not match")
	assert.Len(t, res, 3)
	assert.True(t, p.Armed())
	require.Error(t, script.Exec(bg, rc, []string{k}, []string{""}).Error())
	assert.EqualValues(t, 1, p.Fired())
	assert.False(t, p.Armed())

	m := matchScript("inspect.lua", k)
	assert.True(t, m([]string{"evalsha", strings.ToUpper(sha), "1", k, ""}))
	assert.True(t, m([]string{"EVALSHA_RO", sha, "2", other, k}))
	assert.True(t, m([]string{"EVAL", string(src), "1", k, ""}))
	assert.False(t, m([]string{"EVAL", string(src) + " ", "1", k, ""}))
	assert.False(t, m([]string{"EVALSHA", sha, "1", other, k}), "k is an argument, not a key")
	assert.False(t, m([]string{"EVALSHA", sha, "3", k}), "malformed")
	assert.False(t, m([]string{"GET", k}))
	assert.True(t, matchScript("inspect.lua", "")([]string{"EVALSHA", sha, "0"}))
	assert.False(t, matchScript("acquire.lua", "")([]string{"EVALSHA", sha, "0"}))

	c := matchCommand("set", "")
	assert.True(t, c([]string{"SET", "a", "b"}))
	assert.False(t, c([]string{"GET", "a"}))
	assert.False(t, c(nil))
	assert.False(t, matchCommand("SET", "b")([]string{"SET", "a"}))
	assert.True(t, matchCommand("SET", "b")([]string{"SET", "a", "b"}))
}
