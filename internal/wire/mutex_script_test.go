package wire

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMutexScripts_takeNew: mode TakeNew (a retry of an owner made for its call, whose earlier
// attempts were answered) takes a free lock as Take does, and on a held lock answers the
// holder's pttl without reading the hash, writing nothing. It trusts the caller: the hash is not
// read, so it would not see a hold of its own owner (the library sends it only when there can be
// none).
func TestMutexScripts_takeNew(t *testing.T) {
	l := newLab(t)
	k := l.keys("takenew")
	t.Cleanup(func() { l.do("DEL", k.Lock) })
	args := func(owner string, mode Mode) []string {
		return AcquireArgs{Owner: owner, LeaseMs: "10000", Request: owner, Mode: mode}.Strings()
	}
	dump := func() []string {
		t.Helper()
		return []string{l.str("DUMP", k.Lock), strconv.FormatInt(l.int("PEXPIRETIME", k.Lock), 10)}
	}

	assert.Equal(t, []int64{1, 1, 0}, l.ints(Acquire, k.Acquire(false), args("A", TakeNew)), "a free lock is taken")
	assert.Equal(t, map[string]string{"A": "1"}, l.hash(k.Lock))
	before := dump()
	r := l.ints(Acquire, k.Acquire(false), args("B", TakeNew))
	require.Len(t, r, 2)
	assert.Equal(t, int64(0), r[0], "held by A")
	assert.InDelta(t, 10000, r[1], 200, "A's pttl")
	assert.Equal(t, before, dump(), "nothing written")
	r = l.ints(Acquire, k.Acquire(false), args("A", TakeNew))
	assert.Equal(t, int64(0), r[0], "the hash is not read: not even its own owner's hold is seen")
	assert.Equal(t, []int64{1, 1, 0}, l.ints(Acquire, k.Acquire(false), args("A", Take)),
		"Take reads it: the request ran (a replay, counted once)")
}
