package rlock

import "github.com/redis/rueidis"

// ScriptSource returns the source Redis gets for lua/<file> (classic pub/sub), preludes
// included, or "" for no such script.
func ScriptSource(file string) string { return sources[file] }

// NewSharded is New for tests: the client waits through sharded pub/sub (SSUBSCRIBE and
// SPUBLISH) as it does on a cluster, here on any Redis 7 server.
func NewSharded(client rueidis.Client, opts Options) (*Client, error) {
	c, err := New(client, opts)
	if err == nil {
		c.sharded = true
	}
	return c, err
}
