package rlock

import (
	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/internal/wire"
)

// ScriptSource returns the source Redis gets for internal/wire/lua/<file> (classic pub/sub), preludes
// included, or "" for no such script (see wire.Source).
func ScriptSource(file string) string { return wire.Source(file) }

// ScriptFiles lists the files under internal/wire/lua/ that are scripts (not preludes).
func ScriptFiles() []string { return wire.Files() }

// ShardedScriptSource is ScriptSource of the variant for sharded pub/sub (a cluster's).
func ShardedScriptSource(file string) string { return wire.ShardedSource(file) }

// slot is wire.Slot, for the harness (deploy_test.go).
func slot(key string) uint16 { return wire.Slot(key) }

// NewSharded is New for tests: the client waits through sharded pub/sub (SSUBSCRIBE and
// SPUBLISH) as it does on a cluster, here on any Redis 7 server.
func NewSharded(client rueidis.Client, opts Options) (*Client, error) {
	c, err := New(client, opts)
	if err == nil {
		c.sharded = true
	}
	return c, err
}
