package main

import (
	"errors"
	"flag"
	"io"
	"maps"
	"slices"
	"time"
)

// newFlagSet returns an empty flag set for subcommand sub that reports nothing itself: its
// errors come back from parse.
func newFlagSet(sub string) *flag.FlagSet {
	fs := flag.NewFlagSet(sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses the flags of fs in args, before and between the first n positional
// arguments, and returns those and the arguments after them (after a "--" that follows them,
// if any), unparsed. A parse error is a usageError; -h is flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string, n int) (pos, rest []string, err error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	args = fs.Args()
	for len(pos) < n && len(args) > 0 {
		pos = append(pos, args[0])
		args = args[1:]
		if len(args) > 0 && args[0] == "--" {
			return pos, args[1:], nil
		}
		if err := parseFlags(fs, args); err != nil {
			return nil, nil, err
		}
		args = fs.Args()
	}
	return pos, args, nil
}

// parseFlags runs fs.Parse, turning its errors but flag.ErrHelp into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usagef("%s: %v", fs.Name(), err)
	}
	return err
}

// given returns the names of the flags of fs that were set on the command line.
func given(fs *flag.FlagSet) map[string]bool {
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// nonNegative returns a usage error naming the first of the given duration flags that is
// negative, or nil.
func nonNegative(fs *flag.FlagSet, durations map[string]time.Duration) error {
	for _, name := range slices.Sorted(maps.Keys(durations)) { // a stable message
		if d := durations[name]; d < 0 {
			return usagef("%s: --%s %v is negative", fs.Name(), name, d)
		}
	}
	return nil
}
