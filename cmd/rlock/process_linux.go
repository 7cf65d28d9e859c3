package main

import "syscall"

// setDeathSignal has the kernel send CMD SIGKILL when rlock dies (PR_SET_PDEATHSIG): nothing
// renews the lock then, so CMD must not go on as if it held it.
func setDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
