package rlock

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// quietEvery is how often a failure that goes on (the renewals, the settling of lost
// replies) is logged again while it lasts.
const quietEvery = 10 * time.Second

// quietLog logs background failures that repeat while Redis is away, so that an outage of any
// length gives a handful of lines: the first failure of a run (a WARN), then at most one line
// every quietEvery per key (the renewals, or the settling), saying how long it has failed and how
// often, and one line (an INFO) when the key succeeds again. Its methods are safe for
// concurrent use.
type quietLog struct {
	l       *slog.Logger
	every   time.Duration // quietEvery (tests scale it down)
	failing atomic.Int32  // len(runs), read without mu
	mu      sync.Mutex
	runs    map[string]*failRun // keys failing now
}

// failRun is one run of failures of a key.
type failRun struct {
	since, logged time.Time // its first failure, its last line (or its start, if none yet)
	failures      int
	lines         int // lines logged for it
}

// init sets q up to log to l.
func (q *quietLog) init(l *slog.Logger) { q.l, q.every = l, quietEvery }

// fail records a failure of key with err: logged as msg (with args) when it starts a run, or
// quietEvery after the run's last line, with how long and how often it has failed.
func (q *quietLog) fail(key, msg string, err error, args ...any) { q.record(key, true, msg, err, args) }

// failLate is fail for a failure that matters only if it lasts (the settling of what a call
// left, which the call's own error already reported): its run is logged first quietEvery after
// it began, and its end only if it was.
func (q *quietLog) failLate(key, msg string, err error, args ...any) {
	q.record(key, false, msg, err, args)
}

// record records a failure of key (see fail and failLate; now: log a run's first failure).
func (q *quietLog) record(key string, now0 bool, msg string, err error, args []any) {
	now := time.Now()
	q.mu.Lock()
	r := q.runs[key]
	if r == nil {
		if q.runs == nil {
			q.runs = make(map[string]*failRun)
		}
		r = &failRun{since: now, logged: now}
		q.runs[key] = r
		q.failing.Add(1)
	}
	r.failures++
	first, due := r.failures == 1 && now0, now.Sub(r.logged) >= q.every
	if first || due {
		r.logged = now
		r.lines++
	}
	failures, since := r.failures, r.since
	q.mu.Unlock()
	switch {
	case first:
		q.l.Warn(msg, append(args, "error", err)...)
	case due:
		q.l.Warn(msg, append(args, "error", err, "failing_for", now.Sub(since).Round(time.Millisecond),
			"failures", failures)...)
	}
}

// calm reports whether no key is failing: a success need not be recorded (see ok).
func (q *quietLog) calm() bool { return q.failing.Load() == 0 }

// ok records a success of key: if it was failing, msg (with args) is logged with how long and
// how often it failed, and the run ends.
func (q *quietLog) ok(key, msg string, args ...any) {
	if q.failing.Load() == 0 {
		return
	}
	q.mu.Lock()
	r := q.runs[key]
	if r != nil {
		delete(q.runs, key)
		q.failing.Add(-1)
	}
	q.mu.Unlock()
	if r != nil && r.lines > 0 {
		q.l.Info(msg, append(args, "failed_for", time.Since(r.since).Round(time.Millisecond),
			"failures", r.failures)...)
	}
}
