package rlock

// locker is a lock bound to the Client that made it: what each kind's type embeds, and what
// the acquire and release paths work on. It reaches the client's state about the lock's name
// (its shard) and, through the Client, the goroutines that a new hold concerns.
type locker struct {
	lock
	c  *Client
	sh *shard // the client's state about this name (see shards.of)
}

// bind sets h up as the lock of kind noun called name, with opts; newKind makes its kind, once
// h's keys and settings are set (kinds make the key lists of their scripts once, there).
func (c *Client) bind(h *locker, noun, name string, newKind func(h *locker) kind, opts []MutexOption) {
	h.lock.init(&c.core, noun, name, opts)
	h.c, h.sh = c, c.shards.of(h.keys.Lock)
	h.kind = newKind(h)
}
