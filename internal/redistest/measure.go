package redistest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Trials is the positive number in the environment variable name, or def.
func Trials(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// Measurement skips t, a measurement for the notes, unless the environment variable name sets
// its number of trials, and returns that number.
func Measurement(t *testing.T, name string) int {
	t.Helper()
	if os.Getenv(name) == "" {
		t.Skip("a measurement: set " + name)
	}
	return Trials(name, 0)
}

// CtxWatch records when a context ends.
type CtxWatch struct {
	Done chan struct{} // closed when the context has ended
	At   time.Time     // when it ended; read it once Done is closed
}

// WatchCtx returns a CtxWatch of ctx; its goroutine ends with ctx.
func WatchCtx(ctx context.Context) *CtxWatch {
	w := &CtxWatch{Done: make(chan struct{})}
	go func() {
		<-ctx.Done()
		w.At = time.Now()
		close(w.Done)
	}()
	return w
}

// Ended reports whether the context ended, and when.
func (w *CtxWatch) Ended() (time.Time, bool) {
	select {
	case <-w.Done:
		return w.At, true
	default:
		return time.Time{}, false
	}
}

// DurationStats formats min/median/max of ds.
func DurationStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	return fmt.Sprintf("min %v, median %v, max %v (n=%d)", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]), len(s))
}

// Ms formats d rounded to the millisecond.
func Ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
