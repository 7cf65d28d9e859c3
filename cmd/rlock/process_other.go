//go:build !unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup does nothing here: process groups are a Unix notion.
func setProcessGroup(*exec.Cmd, bool) {}

// signalCmd kills cmd for SIGTERM and SIGKILL and ignores other signals: other systems cannot
// deliver signals to another process, so rlock can neither pass them on nor give CMD a grace
// period before stopping it.
func signalCmd(cmd *exec.Cmd, sig syscall.Signal, _ bool) error {
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		return cmd.Process.Kill()
	}
	return nil
}

// exitStatus is the process's exit code.
func exitStatus(ps *os.ProcessState) int {
	return ps.ExitCode()
}
