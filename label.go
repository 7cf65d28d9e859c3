package rlock

import "context"

// maxLabelLen is the longest label accepted, in bytes.
const maxLabelLen = 256

type labelKey struct{}

// WithLabel returns a copy of ctx that carries label: every hold and wait taken with it (and
// with the hold contexts made from it) is labelled so in Redis, and [State] shows it, with how
// long a labelled hold has been held. A label tells people who holds or waits (a host, a PID, a
// job); it is not an identity. label must be 1 to 256 bytes of UTF-8 without control
// characters; an invalid label makes the lock methods it reaches return an error wrapping
// [ErrInvalid], changing nothing. It does not block.
func WithLabel(ctx context.Context, label string) context.Context {
	return context.WithValue(ctx, labelKey{}, label)
}

// labelOf returns the label ctx carries ("" for none), or an error wrapping ErrInvalid for an
// invalid one.
func labelOf(ctx context.Context) (string, error) {
	label, ok := ctx.Value(labelKey{}).(string)
	if !ok {
		return "", nil
	}
	if err := validateText("label", label, maxLabelLen); err != nil {
		return "", err
	}
	return label, nil
}
