package limiter

import (
	"context"

	"k8s.io/utils/clock"

	rlerrors "github.com/k8sratelimit/k8sratelimit/errors"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/memorystore"
)

// ownSends keeps one process within its budget on its own, whatever a
// shared store decides: a Redis that restarted without its data, or that
// was killed, frozen or slow, can let more through than the policy
// allows, but the process knows what it sent itself. Every request the
// shared store lets go also takes a slot of the same policy in an
// in-process store, reserved at the instant it leaves, and waits for it
// when the process's own sends already fill the policy. While the shared
// store is exact this never holds a request back for more than the
// moment between the store's decision and the send.
//
// A nil *ownSends keeps nothing: the store is the process's own.
type ownSends struct {
	m *memorystore.Store
}

// newOwnSends returns the guard of an Engine whose store s is shared by
// several processes (a store.SeatSharer), nil for an in-process store.
func newOwnSends(s store.Store, c clock.PassiveClock) *ownSends {
	if _, shared := s.(store.SeatSharer); !shared {
		return nil
	}
	return &ownSends{m: memorystore.New(c)}
}

// ownSlot reserves the instant a request that the store let go leaves at
// in this process's own sends, and waits for it, within what is left of
// w's limit. A waiter whose timer fired late confirms where it really
// leaves, moving the own slots after it that it crowds, so that its
// lateness never squeezes more than the policy into a timespan. A request
// whose own slot lies beyond the limit is refused, and its store slot,
// already taken, stays counted unsent: that only delays later requests.
func (b *Budget) ownSlot(ctx context.Context, stop <-chan struct{}, w waitLimits) error {
	l := b.l
	maxWait := w.limit
	if maxWait != store.NoMaxWait {
		maxWait = max(maxWait-l.clock.Since(w.start), 0)
	}
	res, err := l.own.m.Reserve(ctx, b.key, l.policy, store.Request{MaxWait: maxWait})
	switch {
	case err != nil:
		return err
	case !res.OK:
		return b.refuse(res.Wait, w, rlerrors.WaitingForRateSlot)
	}
	for wait := res.Wait; wait > 0; {
		if err := b.await(ctx, stop, wait); err != nil {
			_ = l.own.m.Release(ctx, b.key, res.ID)
			return err
		}
		if wait, err = l.own.m.Confirm(ctx, b.key, res.ID); err != nil {
			return err
		}
	}
	return nil
}
