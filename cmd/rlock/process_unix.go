//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd start in a process group of its own, unless foreground: then it
// stays in rlock's, where the terminal's signals reach it directly. On Linux it also gets
// SIGKILL when rlock dies (see setDeathSignal).
func setProcessGroup(cmd *exec.Cmd, foreground bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: !foreground}
	setDeathSignal(cmd.SysProcAttr)
}

// signalCmd sends sig to the started cmd: to its whole process group when group is true (cmd
// was started with a group of its own), else to cmd alone.
func signalCmd(cmd *exec.Cmd, sig syscall.Signal, group bool) error {
	if group {
		return syscall.Kill(-cmd.Process.Pid, sig)
	}
	return cmd.Process.Signal(sig)
}

// exitStatus is the shell's view of how a process ended: its exit code, or 128+n if signal n
// killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}
