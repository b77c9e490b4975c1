// Package probe records what the end-to-end tests measure: the requests
// that actually leave a client (Wire), the limiter's decisions (Decisions),
// and the most requests sent in any rolling window (MaxInWindow).
package probe
