package main

import (
	"fmt"
	"sync/atomic"

	"github.com/k8sratelimit/k8sratelimit"
	"github.com/k8sratelimit/k8sratelimit/store"
	"github.com/k8sratelimit/k8sratelimit/store/redisstore"
)

// storeUsage counts the requests a shared store could not decide during a
// run, and keeps the error of its first outage. It is safe for concurrent
// use.
type storeUsage struct {
	fallbacks atomic.Int64 // requests decided by the failure policy
	firstErr  atomic.Pointer[error]
}

// note is the store's OnEvent.
func (u *storeUsage) note(e store.Event) {
	switch e.Type {
	case store.EventDown:
		if e.Err != nil {
			u.firstErr.CompareAndSwap(nil, &e.Err)
		}
	case store.EventFallback:
		u.fallbacks.Add(1)
	}
}

// newRedisStore makes the Redis store cfg names, telling u of its
// outages. Its logs go to klog: an outage's start and end, once each.
func newRedisStore(cfg k8sratelimit.Config, u *storeUsage) (*redisstore.Store, error) {
	s, err := redisstore.NewFromURL(cfg.RedisURL.Reveal(), redisstore.Options{Failure: cfg.StoreFailure, OnEvent: u.note})
	if err != nil {
		// Not err itself: go-redis quotes query values, which may be secret.
		return nil, fmt.Errorf("%s=%q: cannot make a Redis client from it", k8sratelimit.EnvRedisURL, cfg.RedisURL)
	}
	return s, nil
}

// summary says how the budget was decided when the store could not be
// used for some requests of the run, naming the redacted URL and the
// cause; "" when it always could.
func (u *storeUsage) summary(cfg k8sratelimit.Config) string {
	n := u.fallbacks.Load()
	if n == 0 {
		return ""
	}
	cause := "error"
	if p := u.firstErr.Load(); p != nil {
		cause = redisstore.Cause(*p)
	}
	var how string
	switch cfg.StoreFailure {
	case store.FailureOpen:
		how = "admitted without any budget (store failure policy open)"
	case store.FailureClosed:
		how = "failed (store failure policy closed)"
	default:
		how = "decided by a budget per process, this process's share of the limit, not by the shared one (store failure policy local)"
	}
	return fmt.Sprintf("Redis at %s was unusable (%s): %d requests were %s.", cfg.RedisURL, cause, n, how)
}
