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
func validateOwner(owner string) error { return validateText("owner id", owner, maxOwnerLen) }

// validateText reports why s cannot be used as what (an owner id, a label): empty, over max
// bytes, not UTF-8, or with a control character; or nil.
func validateText(what, s string, max int) error {
	switch {
	case s == "":
		return invalidf("empty %s", what)
	case len(s) > max:
		return invalidf("%s is %d bytes, more than %d", what, len(s), max)
	case !utf8.ValidString(s):
		return invalidf("%s %q is not valid UTF-8", what, s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return invalidf("%s %q contains a control character", what, s)
		}
	}
	return nil
}
