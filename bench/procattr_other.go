//go:build !linux

package main

import (
	"os"
	"syscall"
)

// termSignal asks a child process to stop.
var termSignal = os.Interrupt

// childProcAttr has no parent-death signal outside Linux; children are
// still stopped on a normal exit and on Ctrl-C.
func childProcAttr() *syscall.SysProcAttr { return nil }

// scriptProcAttr is nil outside Linux: Ctrl-C reaches a child script too, which then stops
// its own children.
func scriptProcAttr() *syscall.SysProcAttr { return nil }
