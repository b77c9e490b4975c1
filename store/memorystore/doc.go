// Package memorystore is the in-memory store.Store, the default: budgets
// shared by the clients of one process, decided on the clock it is given,
// with exact arithmetic for both strategies (window.go: every send instant
// of the last timespan; linear.go: the generic cell rate algorithm).
//
// Its exported surface is New and the Store it returns, which implements
// store.Store, plus two methods of its own: Len, the number of budgets it
// holds, for watching its memory; and Seed, which starts a budget from
// sends made elsewhere, as the Redis store's local budget does when an
// outage begins.
package memorystore
