// Package k8sratelimit gives every program that talks to Kubernetes a
// client-side request budget per API server.
//
// A budget is shared by every client of the same API server in the process
// (typed clientsets, dynamic clients, discovery, informers,
// controller-runtime managers) and, with a shared store, by every process
// that names the same owner. Requests over the budget wait for room instead
// of hammering the server; when waiting would take longer than the caller
// allows, the request fails with a typed error that says how long to wait.
//
// Configuration is strict: LoadConfig and ConfigFromEnv read the
// KUBERNETES_RATELIMIT* environment variables and reject any value they do
// not accept, naming the variable, the value and what is accepted.
package k8sratelimit
