package wire

import (
	"errors"
	"fmt"
	"strings"
)

// Keys are the Redis names of one lock; all share the hash tag {name}.
type Keys struct {
	Lock      string // hash of hold counts (its layout is the kind's; see fields.go and each kind's scripts)
	Fence     string // fencing counter
	Channel   string // release and grant messages (see message.go)
	Queue     string // fair kinds, semaphore: waiters in arrival order
	Deadlines string // fair kinds, semaphore: waiter -> deadline (server ms)
	Leases    string // RWMutex, Semaphore: hold -> lease end (server ms)
	Writers   string // RWMutex: waiting writers -> deadline (server ms)
}

// NewKeys returns the keys of the lock called name under key prefix prefix: the lock hash is
// prefix:{name}, the others add a suffix to it.
func NewKeys(prefix, name string) Keys {
	base := LockKey(prefix, name)
	return Keys{
		Lock:      base,
		Fence:     base + ":fence",
		Channel:   base + ":ch",
		Queue:     base + ":queue",
		Deadlines: base + ":deadlines",
		Leases:    base + ":leases",
		Writers:   base + ":writers",
	}
}

// LockKey returns the key of the lock hash of the lock called name: prefix:{name}.
func LockKey(prefix, name string) string { return prefix + ":{" + name + "}" }

// ErrEmptyName is CheckName's error for an empty lock name.
var ErrEmptyName = errors.New("empty lock name")

// CheckName reports why name cannot name a lock, or nil: it is empty (ErrEmptyName), or it
// starts with '}' (P:{}...} would give an empty hash tag, scattering the lock's keys over
// slots).
func CheckName(name string) error {
	switch {
	case name == "":
		return ErrEmptyName
	case strings.HasPrefix(name, "}"):
		return fmt.Errorf("lock name %q starts with '}'", name)
	}
	return nil
}

// Slot is the Redis Cluster hash slot of key (CRC16/XMODEM of its hash tag, mod 16384).
func Slot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}
