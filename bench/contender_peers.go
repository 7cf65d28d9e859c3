package main

import (
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
	"github.com/redis/rueidis/rueidislock"
)

// Peer settings, stated once so the tables, README and code agree.
const (
	redsyncTries   = 1 << 30                // keep retrying until the context ends
	redislockLease = 30 * time.Second       // bsm/redislock lease (it has no watchdog)
	redislockMin   = 10 * time.Millisecond  // ExponentialBackoff floor
	redislockMax   = 100 * time.Millisecond // ExponentialBackoff cap
)

func init() {
	contenders = append(contenders,
		contenderSpec{
			ID:   "rueidislock",
			Name: "rueidislock",
			Settings: "KeyMajority 1 (one key), NoLoopTracking, defaults otherwise: KeyValidity 5s, " +
				"ExtendInterval 2.5s, TryNextAfter 20ms; waits on client-side-caching invalidations",
			Waits:  true,
			Renews: true,
			New:    newRueidislock,
		},
		contenderSpec{
			ID:   "redsync",
			Name: "redsync v4",
			Settings: "one pool (rueidis driver), expiry 8s (default), retry delay random 50-250ms (default), " +
				"tries unlimited (WithTries 2^30) so a wait ends only with its context",
			Waits: true,
			New:   newRedsync,
		},
		contenderSpec{
			ID:   "redislock",
			Name: "bsm/redislock",
			Settings: "go-redis v9 client (ClusterClient on a cluster; defaults, pool 10 per CPU), lease 30s, " +
				"RetryStrategy ExponentialBackoff(10ms, 100ms)",
			Waits: true,
			New:   newRedislock,
		},
	)
}

// rueidislock

type rueidislockContender struct {
	locker rueidislock.Locker
}

func newRueidislock(cfg contenderConfig) (Contender, error) {
	opt := rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: cfg.Addrs},
		KeyPrefix:      cfg.KeyPrefix,
		KeyMajority:    1,
		NoLoopTracking: true,
	}
	if cfg.Renewal > 0 {
		opt.KeyValidity = 3 * cfg.Renewal
		opt.ExtendInterval = cfg.Renewal
	}
	l, err := rueidislock.NewLocker(opt)
	if err != nil {
		return nil, err
	}
	return &rueidislockContender{locker: l}, nil
}

func (c *rueidislockContender) Close() { c.locker.Close() }

func (c *rueidislockContender) Mutex(key string) Mutex {
	return rueidislockMutex{c: c, key: key}
}

type rueidislockMutex struct {
	c   *rueidislockContender
	key string
}

func (m rueidislockMutex) Lock(ctx context.Context) (Hold, error) {
	lctx, cancel, err := m.c.locker.WithContext(ctx, m.key)
	if err != nil {
		return Hold{}, err
	}
	return Hold{
		Release: func(context.Context) error { cancel(); return nil },
		// The lock context ends when the lease is lost (or ctx ends).
		Lost: func() bool { return lctx.Err() != nil && ctx.Err() == nil },
	}, nil
}

// redsync

type redsyncContender struct {
	client rueidis.Client
	rs     *redsync.Redsync
	prefix string
}

func newRedsync(cfg contenderConfig) (Contender, error) {
	c, err := newRueidis(cfg.Addrs, nil)
	if err != nil {
		return nil, err
	}
	pool := redsyncrueidis.NewPool(rueidiscompat.NewAdapter(c))
	return &redsyncContender{client: c, rs: redsync.New(pool), prefix: cfg.KeyPrefix}, nil
}

func (c *redsyncContender) Close() { c.client.Close() }

func (c *redsyncContender) Mutex(key string) Mutex {
	return redsyncMutex{c: c, key: c.prefix + ":" + key}
}

type redsyncMutex struct {
	c   *redsyncContender
	key string
}

func (m redsyncMutex) Lock(ctx context.Context) (Hold, error) {
	// A redsync Mutex is not safe for concurrent use, so every Lock gets its own.
	mu := m.c.rs.NewMutex(m.key, redsync.WithTries(redsyncTries))
	if err := mu.LockContext(ctx); err != nil {
		return Hold{}, err
	}
	return Hold{Release: func(ctx context.Context) error {
		ok, err := mu.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock found the lock gone")
		}
		return err
	}}, nil
}

// bsm/redislock

type redislockContender struct {
	client goredis.UniversalClient
	locker *redislock.Client
	prefix string
}

func newRedislock(cfg contenderConfig) (Contender, error) {
	var c goredis.UniversalClient
	if cfg.Cluster {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cfg.Addrs})
	} else {
		c = goredis.NewClient(&goredis.Options{Addr: cfg.Addrs[0]})
	}
	if err := c.Ping(context.Background()).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &redislockContender{client: c, locker: redislock.New(c), prefix: cfg.KeyPrefix}, nil
}

func (c *redislockContender) Close() { c.client.Close() }

func (c *redislockContender) Mutex(key string) Mutex {
	return redislockMutex{c: c, key: c.prefix + ":" + key}
}

type redislockMutex struct {
	c   *redislockContender
	key string
}

func (m redislockMutex) Lock(ctx context.Context) (Hold, error) {
	// A retry strategy counts its attempts, so each Obtain needs a fresh one.
	opts := &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(redislockMin, redislockMax)}
	l, err := m.c.locker.Obtain(ctx, m.key, redislockLease, opts)
	if err != nil {
		return Hold{}, err
	}
	return Hold{Release: l.Release}, nil
}
