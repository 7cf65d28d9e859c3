package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The key layout is part of the contract: other clients (the rlock command, operators with
// redis-cli) find a lock by these names.
func TestNewKeys(t *testing.T) {
	assert.Equal(t, Keys{
		Lock:      "p:{n}",
		Fence:     "p:{n}:fence",
		Channel:   "p:{n}:ch",
		Queue:     "p:{n}:queue",
		Deadlines: "p:{n}:deadlines",
		Leases:    "p:{n}:leases",
		Writers:   "p:{n}:writers",
		Leader:    "p:{n}:leader",
	}, NewKeys("p", "n"))
	assert.Equal(t, "p:{n}", LockKey("p", "n"))
}

func TestCheckName(t *testing.T) {
	assert.NoError(t, CheckName("a}b"))
	assert.ErrorIs(t, CheckName(""), ErrEmptyName)
	assert.EqualError(t, CheckName("}x"), `lock name "}x" starts with '}'`)
}

func TestSlot(t *testing.T) {
	// Values from CLUSTER KEYSLOT: the hash tag's slot, or the whole key's without one.
	assert.Equal(t, uint16(12182), Slot("foo"))
	assert.Equal(t, Slot("bar"), Slot("p:{bar}:fence"))
}
