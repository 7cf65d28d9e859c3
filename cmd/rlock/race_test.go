//go:build race

package main

// raceEnabled: the tests were built with -race, and build the rlock binary with it too.
const raceEnabled = true
