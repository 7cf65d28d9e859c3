//go:build !race

package main

// raceEnabled: the tests were built without -race, and so is the rlock binary.
const raceEnabled = false
