package main

import "syscall"

// termSignal asks a child process to stop.
var termSignal = syscall.SIGTERM

// childProcAttr makes the kernel kill a child (redis-server, a worker) when
// this program dies, even by SIGKILL, so nothing is left running.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// scriptProcAttr puts a child script in a process group of its own, so that Ctrl-C in the
// terminal reaches only this program, which stops the script when it is done. It gets no
// parent-death signal: a script killed that way could not stop its own children.
func scriptProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
