package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/k8sratelimit/k8sratelimit/store"
)

// notifier delivers the messages of a budget's channel: "moved", which a
// script publishes when it moves reservations that other processes may be
// waiting on, the cuts of its concurrency limit, and the processes that
// join it (see seats.go).
type notifier struct {
	once   sync.Once
	pubsub *redis.PubSub
	mu     sync.Mutex
	moved  map[string][]func()              // channel -> callbacks
	cuts   map[string][]func(store.SeatCut) // channel -> callbacks
	subbed map[string]bool                  // channels subscribed to
}

// Notify implements store.Notifier: moved is called when another process's
// cooldown moves the budget's reservations, or when the slots of a
// process that went away are given to the waiters after them.
func (s *Store) Notify(key string, moved func()) {
	channel := redisKeys(key)[0]
	s.listen(channel, func(n *notifier) { n.moved[channel] = append(n.moved[channel], moved) })
}

// listen registers a callback with add, under the notifier's lock, and
// subscribes to channel if it is not yet.
func (s *Store) listen(channel string, add func(*notifier)) {
	n := &s.notify
	n.once.Do(func() {
		n.moved = map[string][]func(){}
		n.cuts = map[string][]func(store.SeatCut){}
		n.subbed = map[string]bool{}
		n.pubsub = s.client.Subscribe(context.Background())
		s.wg.Add(1)
		go s.deliver(n.pubsub.Channel())
	})
	n.mu.Lock()
	add(n)
	first := !n.subbed[channel]
	n.subbed[channel] = true
	n.mu.Unlock()
	if first {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
		defer cancel()
		// A failed subscription is retried by the client when it
		// reconnects; waiters still confirm at their slots meanwhile.
		_ = n.pubsub.Subscribe(ctx, channel)
	}
}

// deliver calls the callbacks of each message's channel until the store
// closes.
func (s *Store) deliver(ch <-chan *redis.Message) {
	defer s.wg.Done()
	n := &s.notify
	for {
		select {
		case <-s.done:
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if proc, ok := parseJoin(m.Payload); ok {
				if proc != s.proc {
					s.recount(m.Channel)
				}
				continue
			}
			if cut, ok := s.parseCut(m.Payload); ok {
				n.mu.Lock()
				fs := n.cuts[m.Channel]
				n.mu.Unlock()
				for _, f := range fs {
					f(cut)
				}
				continue
			}
			n.mu.Lock()
			fs := n.moved[m.Channel]
			n.mu.Unlock()
			for _, f := range fs {
				f()
			}
		}
	}
}

// closeNotifier ends the subscription.
func (s *Store) closeNotifier() {
	if p := s.notify.pubsub; p != nil {
		_ = p.Close()
	}
}

// wakeLocal calls this process's callbacks of the budget key, as a
// message on its channel would.
func (s *Store) wakeLocal(key string) {
	n := &s.notify
	n.mu.Lock()
	fs := n.moved[redisKeys(key)[0]]
	n.mu.Unlock()
	for _, f := range fs {
		go f()
	}
}
