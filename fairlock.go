package rlock

// NewFairMutex returns the fair mutex called name: the same API as [Client.NewMutex], but
// locks are handed out in the order waiters arrived.
func (c *Client) NewFairMutex(name string, opts ...MutexOption) *Mutex {
	m := c.NewMutex(name, opts...)
	m.fair = true
	return m
}
