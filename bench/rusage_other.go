//go:build !unix

package main

import "time"

// processCPU cannot tell the process's CPU time on this system: the CPU columns are n/a.
func processCPU() (time.Duration, bool) { return 0, false }
