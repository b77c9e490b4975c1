// Package redisstore is the store.Store that keeps budgets in Redis, so
// that every process naming the same owner shares one exact budget per
// API server.
//
// Each decision is one atomic Lua script (lua/) on the Redis server's
// clock; a process records reservations at most one timespan ahead in
// Redis and holds later ones in-process; processes announce their presence,
// and the reservations of one that goes away stop counting. While Redis
// cannot be reached, the store decides by its store.FailurePolicy,
// locally from this process's share of the limit by default, and learns
// Redis again in the background.
//
// Its exported surface is what a program needs to use it: New (on a
// client the program owns) and NewFromURL (on a client it makes, as the
// root package does), with Options; the Store, which implements
// store.Store and the optional store.Notifier, store.SeatSharer and
// store.Failover that the engine and the root's metrics look for; Status,
// which reads every budget for kube-ratelimit status; and Close. Test
// hooks (a clock offset added to the server's
// time, forced upkeep) are in export_test.go, not here.
package redisstore
