package wire

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An uncontended lock+unlock of every kind is answered with integers by the scripts' fast
// paths (a Lua table costs Redis more to answer), which Script.Ints reads as the arrays they
// stand for; the other paths still answer arrays.
func TestFastPaths_answerIntegers(t *testing.T) {
	l := newLab(t)
	// fast runs s, checks that Redis answered an integer, and returns it read by s.Ints.
	fast := func(s Script, keys, args []string) []int64 {
		t.Helper()
		res := l.exec(s, keys, args)
		n, err := res.AsInt64()
		require.NoError(t, err, "the fast path answers an integer")
		r, err := s.Ints(res)
		require.NoError(t, err)
		t.Logf("integer %d read as %v", n, r)
		return r
	}

	t.Run("mutex", func(t *testing.T) {
		k := l.keys("fastm")
		assert.Equal(t, []int64{1, 1, 0}, fast(Acquire, k.Acquire(false), AcquireArgs{"o1", "10000", "o1", Take, ""}.Strings()))
		// Another owner's attempt takes the body's path, and its array.
		r := l.ints(Acquire, k.Acquire(false), AcquireArgs{"o2", "10000", "o2", Take, ""}.Strings())
		assert.Equal(t, int64(0), r[0], "held by o1")
		assert.Len(t, r, 2)
		assert.Equal(t, []int64{0, 0}, fast(Release, k.Release(), ReleaseArgs{"o1", "rq0000000001", UnlockMessage}.Strings()))
	})

	t.Run("fair mutex", func(t *testing.T) {
		k := l.keys("fastf")
		assert.Equal(t, []int64{1, 1, 0}, fast(FairAcquire, k.FairAcquire(),
			FairAcquireArgs{"o1", "10000", "o1", Take, false, "5000", true, "3000", ""}.Strings()))
		assert.Equal(t, []int64{0, 0}, fast(FairRelease, k.FairRelease(), FairReleaseArgs{"o1", "rq0000000001"}.Strings()))
	})

	t.Run("rwmutex", func(t *testing.T) {
		for _, fair := range []bool{false, true} {
			k := l.keys("fastrw")
			for _, a := range []Access{Write, Read} {
				assert.Equal(t, []int64{1, 1, 0}, fast(RWAcquire, k.RWAcquire(),
					RWAcquireArgs{"o1", "10000", "o1", Take, a, false, "5000", true, fair, "3000", ""}.Strings()))
				assert.Equal(t, []int64{0, 0, 0}, fast(RWRelease, k.RWRelease(),
					RWReleaseArgs{"o1", "rq0000000001", a, fair}.Strings()), "fair %v, access %v", fair, a)
			}
		}
	})

	t.Run("semaphore", func(t *testing.T) {
		k := l.keys("fasts")
		assert.Equal(t, []int64{1, 1, 0}, fast(SemAcquire, k.Sem(),
			SemAcquireArgs{"h1", "10000", "h1", Take, "2", "1", "5000", true, "3000", ""}.Strings()))
		// A second hold takes the body's path, and its array.
		r := l.ints(SemAcquire, k.Sem(), SemAcquireArgs{"h2", "10000", "h2", Take, "2", "1", "5000", true, "3000", ""}.Strings())
		assert.Equal(t, []int64{1, 1, 0}, r[:3])
		_, err := l.exec(SemRelease, k.Sem(), SemReleaseArgs{Hold: "h2"}.Strings()).AsIntSlice()
		require.NoError(t, err, "not the lone hold: the body's array")
		l.ints(SemRelease, k.Sem(), SemReleaseArgs{Hold: "h1"}.Strings())
	})

	t.Run("an unexpected integer", func(t *testing.T) {
		key := l.Prefix + ":{fastx}"
		ctx := context.Background()
		_, err := Acquire.Ints(l.rc.Do(ctx, l.rc.B().Type().Key(key).Build()))
		assert.Error(t, err, "TYPE answers a status, not an integer array")
		_, err = Acquire.Ints(l.rc.Do(ctx, l.rc.B().Strlen().Key(key).Build()))
		assert.Error(t, err, "an acquire's integer other than 1")
	})
}
