package wire

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseMessage(t *testing.T) {
	for _, c := range []struct {
		msg         string
		kind        MessageKind
		addr, grant string
	}{
		{UnlockMessage, WakeOne, "", ""},
		{"anything", WakeOne, "", ""},
		{ReadersMessage, WakeReaders, "", ""},
		{"@owner", WakeAddressed, "owner", ""},
		{"@w:owner", WakeAddressed, "w:owner", ""},
		{"@owner\x00req\x007\x00250", WakeAddressed, "owner", "req\x007\x00250"},
	} {
		kind, addr, grant := ParseMessage(c.msg)
		assert.Equal(t, c.kind, kind, "%q", c.msg)
		assert.Equal(t, c.addr, addr, "%q", c.msg)
		assert.Equal(t, c.grant, grant, "%q", c.msg)
	}
}

func TestParseGrant(t *testing.T) {
	g, ok := ParseGrant("req\x007\x00250")
	assert.True(t, ok)
	assert.Equal(t, Grant{Request: "req", Token: 7, Claim: 250 * time.Millisecond}, g)
	for _, bad := range []string{"", "req", "req\x00x\x00250", "req\x007\x000", "req\x007\x00-1", "req\x007"} {
		_, ok := ParseGrant(bad)
		assert.False(t, ok, "%q", bad)
	}
}

// The grant message the scripts build (queue.lua's grantMessage) is the one ParseMessage
// and ParseGrant read: its fields in that order, NUL-separated.
func TestGrantMessageMatchesQueueLua(t *testing.T) {
	assert.Contains(t, luaSource("queue.lua"),
		"return '@' .. addr .. '\\0' .. req .. '\\0' .. tok .. '\\0' .. claim\n")
}
