package rlock_test

import (
	"time"

	"github.com/rlock-go/rlock"
)

// graceOptions returns o with RestartGrace d (a file of its own, so that the measurements can
// run on a version without the option).
func graceOptions(o rlock.Options, d time.Duration) rlock.Options {
	o.RestartGrace = d
	return o
}
