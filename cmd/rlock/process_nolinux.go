//go:build unix && !linux

package main

import "syscall"

// setDeathSignal does nothing here: only Linux can signal a child when its parent dies, so a
// CMD whose rlock was killed runs on until it ends by itself.
func setDeathSignal(*syscall.SysProcAttr) {}
