package rlock

import "github.com/redis/rueidis"

// NewSharded is New for tests: the client waits through sharded pub/sub (SSUBSCRIBE and
// SPUBLISH) as it does on a cluster, here on any Redis 7 server.
func NewSharded(client rueidis.Client, opts Options) (*Client, error) {
	c, err := New(client, opts)
	if err == nil {
		c.sharded = true
	}
	return c, err
}
