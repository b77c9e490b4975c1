# The test command is `make test`: vet, then every test with the race
# detector. `make fuzz` runs each fuzz target for FUZZTIME; `make bench`
# runs the benchmarks; `make bench-report` writes BENCHMARKS.md and
# docs/benchmarks-raw.txt, the raw output behind it.

GO       ?= go
FUZZTIME ?= 15s
BENCHTIME ?= 1s

.PHONY: test vet fuzz bench bench-report

# The root package's wire tests check the instants requests reach a
# server, with 1 % of a timespan to spare: they run first, on their own,
# not beside the other packages' suites on the same cores.
MODULE := github.com/k8sratelimit/k8sratelimit

test: vet
	$(GO) test -race $(MODULE)
	$(GO) test -race $$($(GO) list ./... | grep -v -x '$(MODULE)')
	cd examples/controller-runtime && $(GO) vet ./... && $(GO) test -race ./...

vet:
	$(GO) vet ./...

# Every Fuzz* function of every package, each for FUZZTIME.
fuzz:
	@set -e; \
	$(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { names = names " " $$1 } /^ok/ { if (names != "") print $$2 names; names = "" }' > .fuzz-targets; \
	trap 'rm -f .fuzz-targets' EXIT; \
	while read -r pkg targets; do \
		for target in $$targets; do \
			echo "fuzz $$pkg $$target for $(FUZZTIME)"; \
			$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$pkg; \
		done; \
	done < .fuzz-targets

bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./...

# The benchmarks BENCHMARKS.md reports, interleaved, with benchstat into
# docs/benchmarks-raw.txt and as tables into BENCHMARKS.md (about 15
# minutes on 2 idle cores; E2E=1 adds the end-to-end APF and seats runs).
bench-report:
	GO="$(GO)" hack/bench-report.sh

# The end-to-end suite against a real etcd and kube-apiserver: builds both
# once into a cache outside the repository (e2e/hack/build-binaries.sh),
# then runs e2e/ against them.
.PHONY: e2e
e2e:
	bin=$$(GO="$(GO)" e2e/hack/build-binaries.sh) && \
	cd e2e && K8SRATELIMIT_E2E_BIN="$$bin" $(GO) test -race -count=1 -timeout 60m ./...
