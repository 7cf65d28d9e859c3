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
// and ParseGrant read: its fields in that order, NUL-separated, the numbers in digits (Lua's
// own conversion writes more than 14 digits in exponent form).
func TestGrantMessageMatchesQueueLua(t *testing.T) {
	assert.Contains(t, luaSource("queue.lua"),
		"return '@' .. addr .. '\\0' .. req .. '\\0' .. string.format('%d', tok) .. '\\0' .. string.format('%d', claim)\n")
}

func TestParseLeaderMessage(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want LeaderEvent
	}{
		{"leader 1785000000000 30000 host-a:8080", LeaderEvent{NewLeader, 1785000000000, 30 * time.Second, "host-a:8080"}},
		{"leader 7 250 ", LeaderEvent{NewLeader, 7, 250 * time.Millisecond, ""}},
		{"leader 7 250 a b\x00c", LeaderEvent{NewLeader, 7, 250 * time.Millisecond, "a b\x00c"}},
		{"proclaim 7 -1 v", LeaderEvent{Proclaimed, 7, -1, "v"}},
		{"proclaim 7 0 v", LeaderEvent{Proclaimed, 7, 0, "v"}},
		{"vacant 7", LeaderEvent{Kind: Vacant, Term: 7}},
	} {
		got, ok := ParseLeaderMessage(c.msg)
		assert.True(t, ok, "%q", c.msg)
		assert.Equal(t, c.want, got, "%q", c.msg)
	}
	for _, bad := range []string{"", "0", "@owner", "leader", "leader 7", "leader 7 250", "leader x 250 v",
		"leader 7 x v", "leader 0 250 v", "leader -3 250 v", "leader 7 -2 v", "vacant", "vacant 0", "vacant 7 x",
		"proclaim 7", "Leader 7 250 v"} {
		_, ok := ParseLeaderMessage(bad)
		assert.False(t, ok, "%q", bad)
	}
}

// The leader messages the scripts build (kind_election.lua) are the ones ParseLeaderMessage
// reads.
func TestLeaderMessagesMatchKindElectionLua(t *testing.T) {
	src := luaSource("kind_election.lua")
	assert.Contains(t, src, "return string.format('%s %d %d ', what, term, lease) .. value\n")
	assert.Contains(t, src, "leaderMessage('leader', term, lease, value)")
	assert.Contains(t, src, "string.format('vacant %d', term)")
	assert.Contains(t, luaSource("el_proclaim.lua"), "leaderMessage('proclaim', ")
}
