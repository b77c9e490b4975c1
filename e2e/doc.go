// Package e2e holds the end-to-end tests of k8sratelimit: they run a real
// etcd and kube-apiserver on loopback ports and drive them through the
// limiter. Run them with `make e2e` from the repository root, which builds
// the two binaries once into a cache outside the repository.
package e2e
