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
	Leader    string // election: the channel where observers hear of leaders (see message.go)
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
		Leader:    base + ":leader",
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

// The KEYS of each script, in the order its header lists them. The library makes each list
// once per lock, not per call.

// Acquire returns acquire.lua's KEYS: the hash, and the fencing counter with fencing.
func (k Keys) Acquire(fencing bool) []string {
	if fencing {
		return []string{k.Lock, k.Fence}
	}
	return []string{k.Lock}
}

// Release returns release.lua's KEYS.
func (k Keys) Release() []string { return []string{k.Lock, k.Channel} }

// Inspect returns inspect.lua's KEYS.
func (k Keys) Inspect() []string { return []string{k.Lock} }

// ForceUnlock returns forceunlock.lua's KEYS: a fair Mutex's have its queue too.
func (k Keys) ForceUnlock(fair bool) []string {
	if fair {
		return []string{k.Lock, k.Channel, k.Queue}
	}
	return []string{k.Lock, k.Channel}
}

// FairAcquire returns fair_acquire.lua's KEYS.
func (k Keys) FairAcquire() []string { return []string{k.Lock, k.Queue, k.Deadlines, k.Fence} }

// FairRelease returns fair_release.lua's KEYS.
func (k Keys) FairRelease() []string {
	return []string{k.Lock, k.Channel, k.Queue, k.Deadlines, k.Fence}
}

// FairLeave returns fair_leave.lua's KEYS.
func (k Keys) FairLeave() []string { return []string{k.Lock, k.Queue, k.Deadlines, k.Channel, k.Fence} }

// RWAcquire returns rw_acquire.lua's KEYS.
func (k Keys) RWAcquire() []string {
	return []string{k.Lock, k.Leases, k.Writers, k.Queue, k.Deadlines, k.Fence}
}

// RWRelease returns the KEYS of rw_release.lua and rw_leave.lua.
func (k Keys) RWRelease() []string {
	return []string{k.Lock, k.Leases, k.Writers, k.Queue, k.Deadlines, k.Channel, k.Fence}
}

// RWForceUnlock returns rw_forceunlock.lua's KEYS.
func (k Keys) RWForceUnlock() []string {
	return []string{k.Lock, k.Leases, k.Queue, k.Deadlines, k.Channel, k.Fence}
}

// RWInspect returns rw_inspect.lua's KEYS.
func (k Keys) RWInspect() []string { return []string{k.Lock, k.Leases} }

// Sem returns the KEYS of sem_acquire.lua, sem_release.lua, sem_leave.lua and
// sem_forcerelease.lua.
func (k Keys) Sem() []string { return []string{k.Lock, k.Leases, k.Queue, k.Deadlines, k.Channel} }

// SemInspect returns sem_inspect.lua's KEYS.
func (k Keys) SemInspect() []string { return []string{k.Lock, k.Leases, k.Deadlines} }

// State returns state.lua's KEYS.
func (k Keys) State() []string {
	return []string{k.Lock, k.Leases, k.Writers, k.Queue, k.Deadlines, k.Fence}
}

// Election returns the KEYS of every election script that writes (el_campaign.lua,
// el_resign.lua, el_proclaim.lua, el_leave.lua, el_forceunlock.lua).
func (k Keys) Election() []string {
	return []string{k.Lock, k.Channel, k.Queue, k.Deadlines, k.Fence, k.Leader}
}

// Leadership returns el_leader.lua's KEYS.
func (k Keys) Leadership() []string { return []string{k.Lock} }

// Member returns the KEYS of one member in a MultiLock's group scripts (multi_acquire.lua,
// multi_release.lua, multi_leave.lua), which take every member's in the order of their ARGV.
func (k Keys) Member() []string { return []string{k.Lock, k.Channel, k.Queue, k.Deadlines, k.Fence} }

// Renew returns the KEYS of one hold in a renewal script (renew.lua, rw_renew.lua,
// sem_renew.lua) and in check.lua: the hash, and the leases for a kind with per-hold leases.
func (k Keys) Renew(leased bool) []string {
	if leased {
		return []string{k.Lock, k.Leases}
	}
	return []string{k.Lock}
}
