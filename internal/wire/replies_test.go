package wire

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseAttempt(t *testing.T) {
	for _, c := range []struct {
		reply []int64
		want  Attempt
		err   error
	}{
		{[]int64{1, 2, 7}, Attempt{Acquired: true, Count: 2, Token: 7}, nil},
		{[]int64{1, 1, 0, 250}, Attempt{Acquired: true, Count: 1, Claim: 250 * time.Millisecond}, nil},
		{[]int64{1, 1, 0, 0}, Attempt{Acquired: true, Count: 1, Claim: time.Millisecond}, nil}, // a grant in its last ms
		{[]int64{0, 1500}, Attempt{PTTL: 1500 * time.Millisecond}, nil},
		{[]int64{0, -1}, Attempt{PTTL: -1}, nil},
		{[]int64{0, -2, 1}, Attempt{Head: true}, nil},
		{[]int64{0, 300, 0, 1}, Attempt{PTTL: 300 * time.Millisecond, Joined: true}, nil},
		{[]int64{-1}, Attempt{}, ErrReadHoldsOnly},
		{[]int64{-3, 5}, Attempt{}, PermitsError{Stored: 5}},
		{[]int64{}, Attempt{}, ErrBadReply},
		{[]int64{0}, Attempt{}, ErrBadReply},
		{[]int64{2, 1, 1}, Attempt{}, ErrBadReply},
	} {
		got, err := ParseAttempt(c.reply)
		assert.Equal(t, c.err, err, "%v", c.reply)
		assert.Equal(t, c.want, got, "%v", c.reply)
	}
}

func TestParseRelease(t *testing.T) {
	r, err := ParseRelease([]int64{2, 0})
	assert.NoError(t, err)
	assert.Equal(t, Released{Left: 2, Total: 2}, r)
	r, err = ParseRWRelease([]int64{0, 3, 1})
	assert.NoError(t, err)
	assert.Equal(t, Released{Left: 0, Woken: 3, Total: 1}, r)
	_, err = ParseRelease([]int64{0, 1, 1})
	assert.Equal(t, ErrBadReply, err)
	_, err = ParseRWRelease([]int64{0, 1})
	assert.Equal(t, ErrBadReply, err)
}

func TestParseInspections(t *testing.T) {
	in, err := ParseInspect([]int64{1, 2, -1})
	assert.NoError(t, err)
	assert.Equal(t, Inspection{Held: true, Count: 2, PTTL: -time.Millisecond}, in)
	rw, err := ParseRWInspect([]int64{0, 3, 1, 0})
	assert.NoError(t, err)
	assert.Equal(t, RWInspection{Readers: 3, Read: 1}, rw)
	free, err := ParseSemInspect([]int64{0, 4})
	assert.NoError(t, err)
	assert.EqualValues(t, 4, free)
	_, err = ParseSemInspect([]int64{-3, 2})
	assert.Equal(t, PermitsError{Stored: 2}, err)
	_, err = ParseInspect([]int64{1})
	assert.Equal(t, ErrBadReply, err)
}

// Decoding the replies of Lock and Unlock costs no allocation.
func TestParseAllocations(t *testing.T) {
	acq, rel := []int64{1, 1, 0}, []int64{0, 1}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_, _ = ParseAttempt(acq)
		_, _ = ParseRelease(rel)
		_, _, _ = ParseMessage("@o\x00r\x001\x00250")
	}))
}

func TestParsePerHold(t *testing.T) {
	p, err := ParsePerHold([]int64{1, 0, 1}, 3)
	assert.NoError(t, err)
	assert.Equal(t, []bool{true, false, true}, []bool{p.Held(0), p.Held(1), p.Held(2)})
	_, err = ParsePerHold([]int64{1, 0}, 3) // a reply for other holds than the call's
	assert.Equal(t, ErrBadReply, err)
}

func TestParseForced(t *testing.T) {
	for reply, want := range map[int64]bool{0: false, 1: true} {
		got, err := ParseForced(reply)
		assert.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := ParseForced(2)
	assert.Equal(t, ErrBadReply, err)
}
