// Package wire is the Redis-side contract of rlock, in one place: the Lua scripts (lua/*.lua)
// and how they are composed and run, the names of a lock's keys and of the special fields of
// its hash, each script's arguments and replies as Go types, and the messages published on a
// lock's channel. The library (the root package) and the rlock command both use it; nothing
// here knows about clients, holds or waiting.
package wire
