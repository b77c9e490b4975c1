// Package ctxopt carries the per-request overrides of a context from the
// root package, which defines them for users (k8sratelimit.WithMaxWait,
// k8sratelimit.WithoutLimit and k8sratelimit.WithClass), to the budget
// engine, which reads them. It is internal so that each override has one
// public definition.
package ctxopt

import (
	"context"
	"time"
)

// Context keys of the overrides.
type (
	maxWaitKey struct{}
	noLimitKey struct{}
	classKey   struct{}
)

// maxWait is the value under maxWaitKey.
type maxWait struct {
	d         time.Duration
	unlimited bool // wait as long as it takes
}

// WithMaxWait returns a context whose requests wait at most d for their
// slot (0: never wait; a negative d counts as 0).
func WithMaxWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, maxWaitKey{}, maxWait{d: max(d, 0)})
}

// WithUnlimitedWait returns a context whose requests wait as long as it
// takes, whatever the configured maximum wait.
func WithUnlimitedWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, maxWaitKey{}, maxWait{unlimited: true})
}

// MaxWait returns the maximum wait set on ctx: ok is false when none is
// set, and unlimited reports WithUnlimitedWait.
func MaxWait(ctx context.Context) (d time.Duration, unlimited, ok bool) {
	o, ok := ctx.Value(maxWaitKey{}).(maxWait)
	return o.d, o.unlimited, ok
}

// WithoutLimit returns a context whose requests are exempt: they never
// wait and consume nothing.
func WithoutLimit(ctx context.Context) context.Context {
	return context.WithValue(ctx, noLimitKey{}, true)
}

// Exempt reports whether ctx was made by WithoutLimit.
func Exempt(ctx context.Context) bool { return ctx.Value(noLimitKey{}) != nil }

// WithClass returns a context whose requests are of traffic class c (a
// limiter.Class).
func WithClass(ctx context.Context, c uint8) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

// Class returns the traffic class set on ctx: ok is false when none is.
func Class(ctx context.Context) (c uint8, ok bool) {
	c, ok = ctx.Value(classKey{}).(uint8)
	return c, ok
}
