package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock"
)

// redisFlags are the flags every subcommand takes: which Redis, and how locks live there.
type redisFlags struct {
	url      string
	prefix   string
	fair     bool
	watchdog time.Duration
	fairWait time.Duration
}

// register defines the flags on fs.
func (f *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "redis", "", "Redis URL (default $REDIS_URL)")
	fs.StringVar(&f.prefix, "prefix", rlock.DefaultKeyPrefix, "key prefix")
	fs.BoolVar(&f.fair, "fair", false, "fair lock")
	durationVar(fs, &f.watchdog, "watchdog", rlock.DefaultWatchdogTimeout, "lease renewed by the watchdog")
	durationVar(fs, &f.fairWait, "fair-wait", rlock.DefaultFairWaitTimeout, "fair waiter's place without polling")
}

// keyPrefix is the key prefix in use: --prefix, or the library's default for an empty one.
func (f *redisFlags) keyPrefix() string {
	if f.prefix == "" {
		return rlock.DefaultKeyPrefix
	}
	return f.prefix
}

// clientOption checks the flags and returns the rueidis options of the Redis URL: --redis,
// else REDIS_URL from env. A plain host:port, as REDIS_ADDR of the library's examples, is
// taken as redis://host:port. Every error is a usage error.
func (f *redisFlags) clientOption(fs *flag.FlagSet, env []string) (rueidis.ClientOption, error) {
	if err := nonNegative(fs, map[string]time.Duration{"watchdog": f.watchdog, "fair-wait": f.fairWait}); err != nil {
		return rueidis.ClientOption{}, err
	}
	u, from := f.url, "--redis"
	if u == "" {
		u, from = lookupEnv(env, "REDIS_URL"), "$REDIS_URL"
	}
	if u == "" {
		return rueidis.ClientOption{}, usagef("%s: no Redis: give --redis URL or set REDIS_URL "+
			"(in a crontab, set it there: cron's environment is nearly empty)", fs.Name())
	}
	if hostPort(u) {
		u = "redis://" + u
	}
	opt, err := rueidis.ParseURL(u)
	if err == nil {
		return opt, nil
	}
	if !strings.Contains(u, "://") {
		scheme := "redis://"
		if strings.HasPrefix(u, "/") {
			scheme = "unix://"
		}
		return opt, usagef("%s: %s is not a Redis URL (it has no scheme://): did you mean %s?",
			fs.Name(), from, redact(scheme+u))
	}
	return opt, usagef("%s: %s %s: %v", fs.Name(), from, redact(u), err)
}

// hostPort reports whether u is a plain host:port (a host name or address and a port number),
// with no scheme.
func hostPort(u string) bool {
	if strings.Contains(u, "://") {
		return false
	}
	host, port, err := net.SplitHostPort(u)
	if err != nil || host == "" || strings.ContainsAny(host, "/@") {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0
}

// lookupEnv returns the value of key in env (KEY=value entries; the last one wins), or "".
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// redact returns the URL u with its password replaced by "xxxxx", for messages; for a u that
// does not parse, the text between the first ':' and the last '@' of its authority.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Redacted()
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "(unparsable URL)"
	}
	authority, path, slash := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if user, _, hasPassword := strings.Cut(authority[:at], ":"); hasPassword {
			authority = user + ":xxxxx" + authority[at:]
		}
	}
	if slash {
		authority += "/" + path
	}
	return scheme + "://" + authority
}

// session is a connection to Redis and the lock client on it.
type session struct {
	rc    rueidis.Client
	locks *rlock.Client
}

// open connects as connect does and reports a failure on stderr: a setting the library refuses
// as a usage error (exit 64), anything else with exit status failed. It returns the session,
// or nil and the exit status.
func open(opt rueidis.ClientOption, f *redisFlags, stderr io.Writer, failed int) (*session, int) {
	s, err := connect(opt, f, stderr)
	if isUsage(err) {
		return nil, usageFailed(stderr, err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rlock: %s\n", errorText(err))
		return nil, failed
	}
	return s, 0
}

// connect opens a session: the rueidis client of opt, and an rlock client with the settings of
// f that logs its background warnings (renewal failures, a lost lock) to stderr. Settings the
// library rejects are a usage error; anything else is an error of the connection.
func connect(opt rueidis.ClientOption, f *redisFlags, stderr io.Writer) (*session, error) {
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to Redis at %s: %w", strings.Join(opt.InitAddress, ","), err)
	}
	locks, err := rlock.New(rc, rlock.Options{
		KeyPrefix:       f.prefix,
		WatchdogTimeout: f.watchdog,
		FairWaitTimeout: f.fairWait,
		Logger:          newLogger(stderr),
	})
	if err != nil {
		rc.Close()
		if errors.Is(err, rlock.ErrInvalid) {
			return nil, usagef("%s", errorText(err))
		}
		return nil, err
	}
	return &session{rc: rc, locks: locks}, nil
}

// mutex returns the mutex NAME of the session, fair if f says so.
func (s *session) mutex(f *redisFlags, name string, opts ...rlock.MutexOption) *rlock.Mutex {
	if f.fair {
		return s.locks.NewFairMutex(name, opts...)
	}
	return s.locks.NewMutex(name, opts...)
}

// rwMutex returns the read-write mutex NAME of the session, fair if f says so.
func (s *session) rwMutex(f *redisFlags, name string, opts ...rlock.MutexOption) *rlock.RWMutex {
	if f.fair {
		return s.locks.NewFairRWMutex(name, opts...)
	}
	return s.locks.NewRWMutex(name, opts...)
}

// close closes the lock client (its watchdog and subscriptions), then the Redis connection.
func (s *session) close() {
	_ = s.locks.Close() // always nil
	s.rc.Close()
}

// lockErr turns an error of the library that wraps ErrInvalid (a bad lock name or owner, or a
// key of another type at the lock's name) into a usage error, and leaves others alone.
func lockErr(err error) error {
	if errors.Is(err, rlock.ErrInvalid) {
		return usagef("%s", errorText(err))
	}
	return err
}
