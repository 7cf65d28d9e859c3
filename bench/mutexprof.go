package main

import (
	"bufio"
	"bytes"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
)

// rlockPackage is the prefix of every function of the rlock package itself (not of its
// sub-packages, nor of this benchmark, whose package is main).
const rlockPackage = "github.com/rlock-go/rlock."

// mutexDelay is the contention the Go mutex profile has recorded so far: the time goroutines
// spent blocked on sync.Mutex and sync.RWMutex, in total and on the locks whose Unlock runs
// in a function of the filtered package. The runtime records a contention at the Unlock that
// ends it, with the Unlock's call stack, so "of the package" means a lock the package releases:
// the client's own locks.
type mutexDelay struct {
	All, Pkg float64 // nanoseconds
}

func (d mutexDelay) sub(o mutexDelay) mutexDelay {
	return mutexDelay{All: d.All - o.All, Pkg: d.Pkg - o.Pkg}
}

// mutexProfiler reads the process's mutex profile. The profile is cumulative and covers the
// whole process, so a figure of one contender is the difference over its slice, when no other
// contender runs.
type mutexProfiler struct {
	prefix string // frames whose function starts with it count as the package's
	hz     float64
	mu     sync.Mutex
	isPkg  map[[32]uintptr]bool // stack -> has a frame of the package
}

func newMutexProfiler(prefix string) *mutexProfiler {
	return &mutexProfiler{prefix: prefix, hz: cyclesPerSecond(), isPkg: map[[32]uintptr]bool{}}
}

// read returns the contention recorded so far. The profile counts every contention only at a
// sampling fraction of 1 (runtime.SetMutexProfileFraction(1)); at a fraction n it records one
// in n, and read scales by n.
func (m *mutexProfiler) read() mutexDelay {
	var recs []runtime.BlockProfileRecord
	for n := 64; ; n *= 2 {
		recs = make([]runtime.BlockProfileRecord, n)
		got, ok := runtime.MutexProfile(recs)
		if ok {
			recs = recs[:got]
			break
		}
	}
	rate := float64(max(runtime.SetMutexProfileFraction(-1), 1))
	m.mu.Lock()
	defer m.mu.Unlock()
	var d mutexDelay
	for _, r := range recs {
		ns := float64(r.Cycles) / m.hz * 1e9 * rate
		d.All += ns
		pkg, ok := m.isPkg[r.Stack0]
		if !ok {
			pkg = hasFrame(r.Stack(), m.prefix)
			m.isPkg[r.Stack0] = pkg
		}
		if pkg {
			d.Pkg += ns
		}
	}
	return d
}

// hasFrame reports whether a call stack has a function whose name starts with prefix.
func hasFrame(stack []uintptr, prefix string) bool {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, prefix) {
			return true
		}
		if !more {
			return false
		}
	}
}

// cyclesPerSecond is the rate of the clock the runtime measures mutex contention with, read
// from the header of the text form of the mutex profile ("cycles/second=…"); 1e9 if the
// header is missing (the clock is then assumed to count nanoseconds).
func cyclesPerSecond() float64 {
	var b bytes.Buffer
	if p := pprof.Lookup("mutex"); p != nil {
		_ = p.WriteTo(&b, 1)
	}
	if hz := parseCyclesPerSecond(b.String()); hz > 0 {
		return hz
	}
	return 1e9
}

// parseCyclesPerSecond reads "cycles/second=N" from a text profile; 0 if there is none.
func parseCyclesPerSecond(text string) float64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "cycles/second="); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return 0
}
