package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress writes status lines to stderr, and a one-line progress bar
// redrawn in place when stderr is a terminal.
type progress struct {
	w   io.Writer
	tty bool

	mu  sync.Mutex
	bar string // the bar now shown, to be cleared before a line
}

func newProgress() *progress {
	fi, err := os.Stderr.Stat()
	return &progress{w: os.Stderr, tty: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

// Linef prints one status line.
func (p *progress) Linef(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) clear() {
	if p.bar != "" {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", len(p.bar)))
		p.bar = ""
	}
}

// Track draws a bar for label, filled to frac() (0..1) and redrawn every
// 200ms, until the returned stop is called. It draws nothing when stderr
// is not a terminal.
func (p *progress) Track(label string, frac func() float64) (stop func()) {
	if !p.tty {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			p.draw(label, frac())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
			p.mu.Lock()
			p.clear()
			p.mu.Unlock()
		})
	}
}

// TrackTime is Track for a phase that lasts d from now.
func (p *progress) TrackTime(label string, d time.Duration) (stop func()) {
	start := time.Now()
	return p.Track(label, func() float64 { return float64(time.Since(start)) / float64(d) })
}

func (p *progress) draw(label string, f float64) {
	const width = 30
	f = min(max(f, 0), 1)
	n := int(f * width)
	bar := fmt.Sprintf("    %s [%s%s] %3.0f%%", label, strings.Repeat("#", n), strings.Repeat(".", width-n), f*100)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprint(p.w, bar)
	p.bar = bar
}
