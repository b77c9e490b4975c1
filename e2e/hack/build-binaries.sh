#!/usr/bin/env bash
# Builds the etcd and kube-apiserver binaries the end-to-end suite runs
# against, once, into a cache directory outside the repository, and prints
# that directory. A later run with the same pinned versions reuses them.
#
# With --locate it builds nothing: it prints the directory when both
# binaries are there and fails otherwise (the test harness uses it).
#
# The cache root is $K8SRATELIMIT_E2E_CACHE, or ~/.cache/k8sratelimit-e2e.
# The key of the subdirectory is a hash of the Go version and of the go.mod
# and go.sum files of e2e/bin/etcd and e2e/bin/kube-apiserver, so changing
# a pinned version builds afresh.
set -euo pipefail

GO=${GO:-go}
e2e_dir=$(cd "$(dirname "$0")/.." && pwd)
bin_src="$e2e_dir/bin"

# Version of the Kubernetes release the binaries report; keep it in step with
# the k8s.io/kubernetes requirement in bin/kube-apiserver/go.mod.
kube_version=v1.37.2
kube_minor=$(echo "$kube_version" | cut -d. -f2)

# cache_key hashes everything that decides what the binaries are.
cache_key() {
	{
		"$GO" env GOVERSION GOOS GOARCH
		echo "$kube_version"
		cat "$bin_src/etcd/go.mod" "$bin_src/etcd/go.sum" "$bin_src/etcd/main.go"
		cat "$bin_src/kube-apiserver/go.mod" "$bin_src/kube-apiserver/go.sum"
	} | sha256sum | cut -c1-16
}

cache_root=${K8SRATELIMIT_E2E_CACHE:-$HOME/.cache/k8sratelimit-e2e}
out="$cache_root/$(cache_key)"

if [ "${1:-}" = "--locate" ]; then
	[ -x "$out/etcd" ] && [ -x "$out/kube-apiserver" ] || exit 1
	echo "$out"
	exit 0
fi
mkdir -p "$out"

# build NAME DIR ARGS... builds one binary in module DIR unless it is cached.
# It writes to a temporary name first so that an interrupted build never
# leaves a half-written binary that a later run would take as complete.
build() {
	local name=$1 dir=$2
	shift 2
	if [ -x "$out/$name" ]; then
		echo "using cached $out/$name" >&2
		return
	fi
	echo "building $name into $out (a cold kube-apiserver build takes 10-20 minutes)" >&2
	local start=$SECONDS
	(cd "$dir" && "$GO" build -o "$out/$name.tmp" "$@")
	mv "$out/$name.tmp" "$out/$name"
	echo "built $name in $((SECONDS - start))s" >&2
}

build etcd "$bin_src/etcd" .
build kube-apiserver "$bin_src/kube-apiserver" \
	-ldflags "-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor" \
	k8s.io/kubernetes/cmd/kube-apiserver

echo "$out"
