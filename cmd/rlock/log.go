package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// lineHandler is the slog.Handler of the library's background warnings (renewal failures, a
// lost lock): one line each on stderr, in rlock's own style,
//
//	rlock: warning: lock lost: owner no longer holds it (lock=nightly owner=3kq8f0b2c1d9e1)
type lineHandler struct {
	mu    *sync.Mutex // one line at a time, shared by the handlers WithAttrs makes
	w     io.Writer
	attrs []slog.Attr
}

// newLogger returns a logger of warnings and errors that writes to w.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(&lineHandler{mu: new(sync.Mutex), w: w})
}

// Enabled lets warnings and errors through.
func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

// Handle writes r as one line.
func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("rlock: warning: ")
	b.WriteString(libPrefix.ReplaceAllString(r.Message, "$1"))
	attrs := append([]slog.Attr(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	for i, a := range attrs {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", a.Key, libPrefix.ReplaceAllString(a.Value.String(), "$1"))
	}
	if len(attrs) > 0 {
		b.WriteString(")")
	}
	b.WriteString("\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// WithAttrs returns a handler that adds attrs to every line.
func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &lineHandler{mu: h.mu, w: h.w, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

// WithGroup returns h: the library logs no groups, and flat keys read well enough.
func (h *lineHandler) WithGroup(string) slog.Handler { return h }
