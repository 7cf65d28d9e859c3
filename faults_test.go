package rlock_test

// Matchers of the requests the fault proxy (redistest.Proxy) acts on: the library's scripts,
// as it runs them, and plain commands.

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/rlock-go/rlock/internal/wire"
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
