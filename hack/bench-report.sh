#!/usr/bin/env bash
# Writes BENCHMARKS.md and docs/benchmarks-raw.txt from a fresh run: the
# in-process benchmarks of store/memorystore and limiter in ROUNDS
# interleaved rounds (fairer to A/B pairs on a machine whose load drifts
# than -count, which runs each benchmark N times in a row), the Redis
# benchmarks and the shared-seats one REDIS_COUNT times (needs
# redis-server on PATH), benchstat over each into the raw file, and the
# tables of BENCHMARKS.md from the medians (hack/benchreport).
#
# With E2E=1 it also runs the end-to-end APF and seats tests, without the
# race detector, against the servers `make e2e` built, and writes the
# end-to-end section from their -v output; without it that section of
# the current BENCHMARKS.md is kept as it is.
#
# It takes about 15 minutes on 2 cores (E2E=1 adds about 5); run it on an
# otherwise idle machine. A quick check of the script itself:
# ROUNDS=1 REDIS_COUNT=1 BENCHTIME=50ms REDIS_BENCHTIME=100ms hack/bench-report.sh
set -euo pipefail

GO=${GO:-go}
ROUNDS=${ROUNDS:-10}
REDIS_COUNT=${REDIS_COUNT:-5}
BENCHTIME=${BENCHTIME:-500ms}
REDIS_BENCHTIME=${REDIS_BENCHTIME:-1s}
SEATS_BENCHTIME=${SEATS_BENCHTIME:-5000x}
root=$(cd "$(dirname "$0")/.." && pwd)
raw="$root/docs/benchmarks-raw.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
benchstat() { "$GO" run golang.org/x/perf/cmd/benchstat@latest "$@"; }
# benchlines drops the log lines a benchmark writes (klog's, as client-go
# logs) and joins a result split by them: "BenchmarkX-2 <log lines> N ...",
# the first log line on the name's line or on its own.
benchlines() {
	awk '/^[IWEF][0-9][0-9][0-9][0-9] [0-9][0-9]:/ { next }
		/^Benchmark[^ \t]*[ \t]+[IWEF][0-9][0-9][0-9][0-9] [0-9][0-9]:/ { match($0, /^Benchmark[^ \t]*[ \t]+/); pending = substr($0, 1, RLENGTH); next }
		/^Benchmark[^ \t]*[ \t]*$/ { pending = $0; next }
		pending != "" && /^[ \t]+[0-9]+[ \t]/ { print pending $0; pending = ""; next }
		{ if (pending != "") print pending; pending = ""; print }
		END { if (pending != "") print pending }'
}

cd "$root"
"$GO" test -c -o "$tmp/store.test" ./store/memorystore/
"$GO" test -c -o "$tmp/limiter.test" ./limiter/
for i in $(seq "$ROUNDS"); do
	echo "round $i of $ROUNDS" >&2
	(cd store/memorystore && "$tmp/store.test" -test.run '^$' -test.bench '^Benchmark([^R]|R[^e])' -test.benchmem -test.benchtime "$BENCHTIME")
	(cd limiter && "$tmp/limiter.test" -test.run '^$' -test.bench '^Benchmark([^S]|S[^e])' -test.benchmem -test.benchtime "$BENCHTIME")
done >"$tmp/inprocess.txt"

echo "redis benchmarks, $REDIS_COUNT times" >&2
"$GO" test -run '^$' -bench 'RedisAdmission|RedisMemory' -benchmem -benchtime "$REDIS_BENCHTIME" -count "$REDIS_COUNT" ./store/redisstore/ >"$tmp/redis.txt"
"$GO" test -run '^$' -bench SeatsSharedThroughRedis -benchtime "$SEATS_BENCHTIME" -count "$REDIS_COUNT" . | benchlines >>"$tmp/redis.txt"

e2e_flag=()
if [ "${E2E:-}" = 1 ]; then
	echo "end-to-end APF and seats tests" >&2
	bin=$(GO="$GO" e2e/hack/build-binaries.sh)
	if ! (cd e2e && K8SRATELIMIT_E2E_BIN="$bin" "$GO" test -count=1 -timeout 30m -run 'TestAPF|TestSeats|TestTrafficClasses' -v . 2>&1) >"$tmp/e2e.txt"; then
		# The temporary directory goes with the script: keep what failed.
		kept="${TMPDIR:-/tmp}/k8sratelimit-bench-e2e.txt"
		cp "$tmp/e2e.txt" "$kept"
		echo "the end-to-end tests failed; their output is in $kept" >&2
		exit 1
	fi
	e2e_flag=(-e2e "$tmp/e2e.txt" -e2e-note ", without the race detector")
fi

today=$(date -u +%Y-%m-%d)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1 | sed 's/[[:space:]]*$//')
redis=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
machine="$(nproc) CPUs (${cpu:-unknown}), $("$GO" env GOVERSION), $(uname -sr) $("$GO" env GOARCH), Redis $redis on loopback"

{
	echo "Raw benchmark output behind BENCHMARKS.md, written by hack/bench-report.sh"
	echo "(make bench-report) on $today: $machine."
	echo
	echo "==> In-process benchmarks: benchstat summary ($ROUNDS interleaved rounds)"
	echo
	benchstat "$tmp/inprocess.txt"
	echo
	echo "==> Redis benchmarks: benchstat summary ($REDIS_COUNT runs)"
	echo
	benchstat "$tmp/redis.txt"
	echo
	echo "==> In-process benchmarks: raw lines"
	echo
	cat "$tmp/inprocess.txt"
	echo
	echo "==> Redis benchmarks: raw lines"
	echo
	cat "$tmp/redis.txt"
	if [ -f "$tmp/e2e.txt" ]; then
		echo
		echo "==> End-to-end: APF and seats tests (-v)"
		echo
		cat "$tmp/e2e.txt"
	fi
} >"$tmp/raw.txt"

"$GO" run ./hack/benchreport -previous BENCHMARKS.md -o "$tmp/BENCHMARKS.md" \
	-date "$today" -machine "$machine" -rounds "$ROUNDS" -redis-count "$REDIS_COUNT" \
	"${e2e_flag[@]}" "$tmp/inprocess.txt" "$tmp/redis.txt"
mv "$tmp/raw.txt" "$raw"
mv "$tmp/BENCHMARKS.md" BENCHMARKS.md
echo "wrote BENCHMARKS.md and $raw" >&2
