package main

import (
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts the profiles that -cpuprofile and -mutexprofile ask for (an empty path:
// none) of this process: the in-process scenarios (1, 2, 5, 6, 9, 10, 11); a worker process of
// the contended scenario starts its own with -workerprofiles. The mutex profile records every contention (fraction 1) from now on. stop writes
// both files.
func startProfiles(cpuPath, mutexPath string) (stop func() error, err error) {
	var cpu *os.File
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, err
		}
	}
	prev := 0
	if mutexPath != "" {
		prev = runtime.SetMutexProfileFraction(1)
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if mutexPath != "" {
			f, err := os.Create(mutexPath)
			if err == nil {
				err = pprof.Lookup("mutex").WriteTo(f, 0)
				errs = append(errs, f.Close())
			}
			errs = append(errs, err)
			runtime.SetMutexProfileFraction(prev)
		}
		return errors.Join(errs...)
	}, nil
}
