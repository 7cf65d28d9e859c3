package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
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

// parseFlags runs fs.Parse, turning its errors but flag.ErrHelp into usage errors that spell
// flags as the help does (flagMessage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usagef("%s: %s", fs.Name(), flagMessage(err.Error()))
	}
	return err
}

// The messages of the flag package (FlagSet.Parse), which spell a flag with one dash.
var (
	flagUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagNoValue   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	flagBadBool   = regexp.MustCompile(`^invalid boolean value (".*") for -+([^:]+): .*$`)
	flagBadValue  = regexp.MustCompile(`^invalid value (".*") for flag -+([^:]+): (.*)$`)
)

// flagMessage rewrites a parse error of the flag package in rlock's style, the flag spelled
// with two dashes as the help spells it, and its value after it:
//
//	flag provided but not defined: -timeout      unknown flag --timeout
//	flag needs an argument: -wait                --wait needs a value
//	invalid boolean value "x" for -fair: ...     --fair=x: not true or false
//	invalid value "5" for flag -wait: REASON     --wait 5: REASON
//
// Other messages are returned as they are.
func flagMessage(msg string) string {
	if m := flagUndefined.FindStringSubmatch(msg); m != nil {
		return "unknown flag --" + m[1]
	}
	if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		return "--" + m[1] + " needs a value"
	}
	if m := flagBadBool.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s=%s: not true or false", m[2], unquote(m[1]))
	}
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s %s: %s", m[2], unquote(m[1]), m[3])
	}
	return msg
}

// unquote returns the string that the Go-quoted q stands for, or q if it is not one.
func unquote(q string) string {
	if s, err := strconv.Unquote(q); err == nil {
		return s
	}
	return q
}

// durationValue is a flag.Value of a time.Duration whose parse errors say what is wrong:
// "missing unit, e.g. 5s" for a bare number.
type durationValue struct{ p *time.Duration }

// durationVar defines a duration flag of fs stored in p, with default value.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, help string) {
	*p = value
	fs.Var(durationValue{p}, name, help)
}

// Set parses s as a duration.
func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err == nil {
		*v.p = d
		return nil
	}
	if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
		return fmt.Errorf("missing unit, e.g. %ss", s)
	}
	return errors.New("not a duration, e.g. 500ms, 10s, 5m, 1h")
}

// String returns the duration, or "" for the zero Value that flag makes to print defaults.
func (v durationValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

// intValue is a flag.Value of an int64 whose parse errors say what is wrong.
type intValue struct{ p *int64 }

// intVar defines an integer flag of fs stored in p, with default value.
func intVar(fs *flag.FlagSet, p *int64, name string, value int64, help string) {
	*p = value
	fs.Var(intValue{p}, name, help)
}

// Set parses s as a whole number (decimal, or 0x... and the other prefixes of strconv).
func (v intValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return errors.New("out of range")
	case err != nil:
		return errors.New("not a whole number")
	}
	*v.p = n
	return nil
}

// String returns the number, or "" for the zero Value that flag makes to print defaults.
func (v intValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatInt(*v.p, 10)
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

// errorText is the message of err without the "rlock: " that the library's errors start with
// (and that the errors they wrap start with, after a ": "): rlock adds its own once, in front
// of the whole line.
func errorText(err error) string {
	return libPrefix.ReplaceAllString(err.Error(), "$1")
}

// libPrefix matches the library's "rlock: " at the start of a message or of a wrapped one.
var libPrefix = regexp.MustCompile(`(^|: )rlock: `)
