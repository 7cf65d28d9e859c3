package rlock

import "github.com/rlock-go/rlock/internal/wire"

// script returns the variant of s that c runs: sharded pub/sub on a cluster, and with c's
// Options.RestartGrace, if set (made once per client and script).
func (c *Client) script(s wire.Script) wire.Variant {
	v := s.For(c.sharded)
	if c.graceMs == 0 {
		return v
	}
	if g, ok := c.gracedScripts.Load(v.SHA1()); ok {
		return g.(wire.Variant)
	}
	g, _ := c.gracedScripts.LoadOrStore(v.SHA1(), v.WithGrace(c.graceMs))
	return g.(wire.Variant)
}
