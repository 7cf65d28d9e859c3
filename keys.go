package rlock

import "strings"

// lockKeys are the Redis names of one lock; all share the hash tag {name}.
type lockKeys struct {
	lock      string // hash of hold counts (its layout is the kind's; see each kind's scripts)
	fence     string // fencing counter
	channel   string // release messages
	queue     string // fair kinds, semaphore: waiters in arrival order
	deadlines string // fair kinds, semaphore: waiter -> deadline (server ms)
	leases    string // RWMutex, Semaphore: hold -> lease end (server ms)
	writers   string // RWMutex: waiting writers -> deadline (server ms)
}

func newLockKeys(prefix, name string) lockKeys {
	base := prefix + ":{" + name + "}"
	return lockKeys{
		lock:      base,
		fence:     base + ":fence",
		channel:   base + ":ch",
		queue:     base + ":queue",
		deadlines: base + ":deadlines",
		leases:    base + ":leases",
		writers:   base + ":writers",
	}
}

// validateName reports why name cannot name a lock, or nil.
func validateName(name string) error {
	switch {
	case name == "":
		return invalidf("empty lock name")
	case strings.HasPrefix(name, "}"):
		// P:{}...} would give an empty hash tag, scattering the lock's keys over slots.
		return invalidf("lock name %q starts with '}'", name)
	}
	return nil
}

// slot is the Redis Cluster hash slot of key (CRC16/XMODEM of its hash tag, mod 16384).
func slot(key string) uint16 {
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
