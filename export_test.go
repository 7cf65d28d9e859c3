package rlock

import (
	"strings"

	"github.com/redis/rueidis"
)

// ScriptSource returns the source Redis gets for lua/<file> (classic pub/sub), preludes
// included, or "" for no such script.
func ScriptSource(file string) string { return sources[file] }

// ScriptFiles lists the files under lua/ that are scripts (not preludes).
func ScriptFiles() []string {
	files := make([]string, 0, len(sources))
	for f := range sources {
		files = append(files, f)
	}
	return files
}

// ShardedScriptSource is ScriptSource of the variant for sharded pub/sub (a cluster's).
func ShardedScriptSource(file string) string {
	return strings.Replace(sources[file], classicPublish, shardedPublish, 1)
}

// NewSharded is New for tests: the client waits through sharded pub/sub (SSUBSCRIBE and
// SPUBLISH) as it does on a cluster, here on any Redis 7 server.
func NewSharded(client rueidis.Client, opts Options) (*Client, error) {
	c, err := New(client, opts)
	if err == nil {
		c.sharded = true
	}
	return c, err
}
