package rlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"unicode/utf8"
)

// maxOwnerLen is the longest owner id accepted, in bytes.
const maxOwnerLen = 256

type ownerKey struct{}

// WithOwner returns a copy of ctx that carries owner as the lock owner. Every Lock given that
// context, in any process, acts for that owner: holds are counted per owner, so this is how
// processes share a reentrant hold. owner must be non-empty, at most 256 bytes of UTF-8 without
// control characters; an invalid owner makes the lock methods it reaches return an error
// wrapping [ErrInvalid].
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// Owner returns the owner id that ctx carries, from [WithOwner] or a hold context, and
// whether it carries one.
func Owner(ctx context.Context) (string, bool) {
	owner, ok := ctx.Value(ownerKey{}).(string)
	return owner, ok
}

// NewOwnerID returns a fresh random owner id (32 hex digits). It does not block.
func NewOwnerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// validateOwner reports why owner cannot be used as an owner id, or nil.
func validateOwner(owner string) error {
	switch {
	case owner == "":
		return invalidf("empty owner id")
	case len(owner) > maxOwnerLen:
		return invalidf("owner id is %d bytes, more than %d", len(owner), maxOwnerLen)
	case !utf8.ValidString(owner):
		return invalidf("owner id %q is not valid UTF-8", owner)
	}
	for _, r := range owner {
		if r < 0x20 || r == 0x7f {
			return invalidf("owner id %q contains a control character", owner)
		}
	}
	return nil
}
