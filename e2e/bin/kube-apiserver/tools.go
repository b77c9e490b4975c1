//go:build tools

// Package tools records the kube-apiserver command as a dependency of this
// module so that `go build k8s.io/kubernetes/cmd/kube-apiserver` resolves
// against the versions pinned in go.mod.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
