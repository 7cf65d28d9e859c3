package main

import "syscall"

// termSignal asks a child process to stop.
var termSignal = syscall.SIGTERM

// childProcAttr makes the kernel kill a child (redis-server, a worker) when
// this program dies, even by SIGKILL, so nothing is left running.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
