// Package setup creates what the end-to-end tests need on a fresh API
// server: the ordinary users' permissions and an API Priority and Fairness
// priority level that rejects readily, per throttled user.
package setup
