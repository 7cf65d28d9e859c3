package main

import (
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestParseCyclesPerSecond(t *testing.T) {
	if got := parseCyclesPerSecond("--- mutex:\ncycles/second=2394444231\nsampling period=1\n"); got != 2394444231 {
		t.Fatalf("got %v", got)
	}
	if got := parseCyclesPerSecond("nothing here"); got != 0 {
		t.Fatalf("got %v, want 0", got)
	}
}

// contendedUnlock holds mu for d while another goroutine waits for it, and unlocks it here, so
// the mutex profile records about d of contention with this function on the Unlock's stack.
//
//go:noinline
func contendedUnlock(mu *sync.Mutex, d time.Duration) {
	mu.Lock()
	done := make(chan struct{})
	go func() {
		mu.Lock()
		//lint:ignore SA2001 an empty critical section: only the wait matters
		mu.Unlock()
		close(done)
	}()
	time.Sleep(d)
	mu.Unlock()
	<-done
}

// TestMutexProfiler checks that a known contention shows up, about its length, in the total
// and under a prefix that the unlocking frame has, and not under a prefix nothing has.
func TestMutexProfiler(t *testing.T) {
	prev := runtime.SetMutexProfileFraction(1)
	defer runtime.SetMutexProfileFraction(prev)
	// In a test binary, package main's functions are named by its import path.
	mine := newMutexProfiler(runtime.FuncForPC(reflect.ValueOf(contendedUnlock).Pointer()).Name())
	other := newMutexProfiler("no.such/package.")
	m0, o0 := mine.read(), other.read()
	var mu sync.Mutex
	const d = 50 * time.Millisecond
	// On a loaded machine the waiter may not start waiting before the holder unlocks; try again
	// then (the length of the wait is not the point: where it is counted is).
	var got mutexDelay
	for range 5 {
		contendedUnlock(&mu, d)
		if got = mine.read().sub(m0); got.Pkg > 0 {
			break
		}
	}
	gotOther := other.read().sub(o0)
	if got.Pkg <= 0 || got.Pkg > float64(5*d)*20 {
		t.Fatalf("contention under the prefix %v, want some, at most a few times %v", time.Duration(got.Pkg), d)
	}
	if got.All < got.Pkg {
		t.Fatalf("total %v below the prefix's %v", time.Duration(got.All), time.Duration(got.Pkg))
	}
	if gotOther.Pkg != 0 {
		t.Fatalf("contention %v under a prefix no frame has", time.Duration(gotOther.Pkg))
	}
}
