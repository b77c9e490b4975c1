#!/usr/bin/env bash
# Regenerates docs/benchmarks-raw.txt, the raw output behind BENCHMARKS.md:
# the in-process benchmarks of store/ and limiter/ in ROUNDS interleaved
# rounds (fairer to A/B pairs on a machine whose load drifts than -count,
# which runs each benchmark N times in a row), the Redis benchmarks
# REDIS_COUNT times (needs redis-server on PATH), and benchstat over each.
# With E2E=1 it also runs the end-to-end APF and seats tests against the
# servers `make e2e` built, and appends their -v output.
#
# It takes about 5 minutes for the in-process rounds and 10 for Redis on 2
# cores; run it on an otherwise idle machine, then update the tables in
# BENCHMARKS.md from the summaries.
set -euo pipefail

GO=${GO:-go}
ROUNDS=${ROUNDS:-10}
REDIS_COUNT=${REDIS_COUNT:-5}
BENCHTIME=${BENCHTIME:-500ms}
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/docs/benchmarks-raw.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
benchstat() { "$GO" run golang.org/x/perf/cmd/benchstat@latest "$@"; }

cd "$root"
"$GO" test -c -o "$tmp/store.test" ./store/memorystore/
"$GO" test -c -o "$tmp/limiter.test" ./limiter/
for i in $(seq "$ROUNDS"); do
	echo "round $i of $ROUNDS" >&2
	(cd store/memorystore && "$tmp/store.test" -test.run '^$' -test.bench '^Benchmark([^R]|R[^e])' -test.benchmem -test.benchtime "$BENCHTIME")
	(cd limiter && "$tmp/limiter.test" -test.run '^$' -test.bench . -test.benchmem -test.benchtime "$BENCHTIME")
done >"$tmp/inprocess.txt"

echo "redis benchmarks, $REDIS_COUNT times" >&2
"$GO" test -run '^$' -bench Redis -benchmem -count "$REDIS_COUNT" ./store/redisstore/ >"$tmp/redis.txt"

{
	echo "Raw benchmark output behind BENCHMARKS.md, written by hack/bench-report.sh"
	echo "(make bench-report) on $(date -u +%Y-%m-%d): $("$GO" version), $(nproc) CPUs."
	echo
	echo "==> In-process benchmarks: benchstat summary ($ROUNDS interleaved rounds)"
	echo
	benchstat "$tmp/inprocess.txt"
	echo
	echo "==> In-process benchmarks: raw lines"
	echo
	cat "$tmp/inprocess.txt"
	echo
	echo "==> Redis benchmarks: benchstat summary ($REDIS_COUNT runs)"
	echo
	benchstat "$tmp/redis.txt"
	echo
	echo "==> Redis benchmarks: raw lines"
	echo
	cat "$tmp/redis.txt"
	if [ "${E2E:-}" = 1 ]; then
		echo
		echo "==> End-to-end: APF and seats tests (-v)"
		echo
		bin=$(GO="$GO" e2e/hack/build-binaries.sh)
		(cd e2e && K8SRATELIMIT_E2E_BIN="$bin" "$GO" test -race -count=1 -run 'TestAPF|TestSeats' -v . 2>&1)
	fi
} >"$tmp/report.txt"
mv "$tmp/report.txt" "$out"
echo "wrote $out" >&2
