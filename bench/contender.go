package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// A Contender is one lock library with fixed settings, connected to Redis.
// One Contender value stands for one client instance (one process's worth
// of connections); goroutines share it.
type Contender interface {
	// Mutex returns a handle on the lock named key for the calling
	// goroutine. Two goroutines each calling Lock on their own handle are
	// two owners and exclude each other.
	Mutex(key string) Mutex
	// Close releases the contender's clients.
	Close()
}

// A Mutex is one goroutine's handle on one lock.
type Mutex interface {
	// Lock blocks until the lock is held or ctx is done.
	Lock(ctx context.Context) (Hold, error)
}

// A Hold is one acquired lock.
type Hold struct {
	// Release gives the lock back.
	Release func(ctx context.Context) error
	// Lost reports whether the library has signalled that the lease is
	// gone; nil when the library has no such signal.
	Lost func() bool
	// Accounts and Retries: the accounts a transfer holds and how often it started again
	// (transfer scenario only).
	Accounts []int
	Retries  int
}

// contenderConfig is what every contender is built from.
type contenderConfig struct {
	Addrs     []string // the server, or every node of a cluster
	Cluster   bool
	KeyPrefix string // every key of this contender starts with it
	// Renewal asks for a short automatic lease (scenario 6): the lease is
	// renewal*3 and it is renewed every renewal period.
	Renewal time.Duration
}

// contenderSpec describes one contender: how to build it and what it can do.
type contenderSpec struct {
	ID       string // stable id, used on the command line and in JSON
	Name     string // shown in tables
	Settings string // the settings, in words
	// Waits is false for the baseline, which cannot wait for a held lock.
	Waits bool
	// Renews is true when the library renews leases by itself.
	Renews bool
	// Only, if set, lists the scenarios (by id) the contender runs in; it has no row in the others.
	Only []string
	// MinRedis, if set, is the least Redis major version the contender runs on.
	MinRedis int
	New      func(cfg contenderConfig) (Contender, error)
	// NewRW and NewSem build the contenders of the read-heavy and semaphore scenarios
	// (contender_kinds.go), which have no New.
	NewRW  func(cfg contenderConfig) (RWContender, error)
	NewSem func(cfg contenderConfig) (SemContender, error)
}

// contenders lists every contender in table order. The rlock entries are
// added by contender_rlock.go.
var contenders []contenderSpec

func init() {
	contenders = append(contenders, contenderSpec{
		ID:       "baseline",
		Name:     "baseline EVALSHA pair",
		Settings: "rueidis defaults; acquire = EVALSHA of SET NX PX, release = EVALSHA of compare-and-DEL; no waiting",
		New:      newBaseline,
	})
}

// sortContenders puts the registered contenders in the order of tableOrder.
func sortContenders() {
	rank := func(id string) int {
		for i, o := range tableOrder {
			if o == id {
				return i
			}
		}
		return len(tableOrder)
	}
	for i := 1; i < len(contenders); i++ {
		for j := i; j > 0 && rank(contenders[j].ID) < rank(contenders[j-1].ID); j-- {
			contenders[j], contenders[j-1] = contenders[j-1], contenders[j]
		}
	}
}

// tableOrder is the row order of every table.
var tableOrder = []string{
	"baseline", "floor", "floor-spublish", "rlock-pubsub", "rlock-nodeadline", "rlock-spin10ms", "rlock-spin100ms",
	"rlock-fair", "rlock-rw-write", "rlock-rw-read", "rlock-rw-fair-write", "rlock-rw-fair-read", "rlock-sem-1",
	"rueidislock", "redsync", "redislock",
}

// newRueidis connects a rueidis client with default options: a cluster client when addrs are
// cluster nodes (rueidis finds out).
func newRueidis(addrs []string, tweak func(*rueidis.ClientOption)) (rueidis.Client, error) {
	opt := rueidis.ClientOption{InitAddress: addrs}
	if tweak != nil {
		tweak(&opt)
	}
	return rueidis.NewClient(opt)
}

// errNotObtained is what the baseline returns when the lock is held.
var errNotObtained = errors.New("baseline: lock held by another owner")

// The baseline is the least a lock can do on Redis: one script to take the
// key and one script to delete it if it is still ours.
var (
	baselineAcquire = rueidis.NewLuaScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`)
	baselineRelease = rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

type baseline struct {
	client rueidis.Client
	prefix string
}

func newBaseline(cfg contenderConfig) (Contender, error) {
	c, err := newRueidis(cfg.Addrs, nil)
	if err != nil {
		return nil, err
	}
	return &baseline{client: c, prefix: cfg.KeyPrefix}, nil
}

func (b *baseline) Close() { b.client.Close() }

func (b *baseline) Mutex(key string) Mutex {
	return &baselineMutex{b: b, key: b.prefix + ":" + key, id: randomID()}
}

type baselineMutex struct {
	b   *baseline
	key string
	id  string // random per handle, so values differ between owners
	seq uint64
}

// baselineLease is the lease of a baseline lock; it is never renewed.
const baselineLease = 30 * time.Second

func (m *baselineMutex) Lock(ctx context.Context) (Hold, error) {
	m.seq++
	val := m.id + ":" + strconv.FormatUint(m.seq, 10)
	err := baselineAcquire.Exec(ctx, m.b.client, []string{m.key},
		[]string{val, strconv.FormatInt(baselineLease.Milliseconds(), 10)}).Error()
	if rueidis.IsRedisNil(err) {
		return Hold{}, errNotObtained
	}
	if err != nil {
		return Hold{}, err
	}
	return Hold{Release: func(ctx context.Context) error {
		n, err := baselineRelease.Exec(ctx, m.b.client, []string{m.key}, []string{val}).AsInt64()
		if err == nil && n != 1 {
			err = errors.New("baseline: lock was not held at release")
		}
		return err
	}}, nil
}

// pingOnce sends one PING: the round trip every lock operation pays at least.
func pingOnce(ctx context.Context, c rueidis.Client) error {
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

// randomID returns 16 random hex digits.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
