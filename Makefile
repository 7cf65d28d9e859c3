# rlock: `make test` runs vet and the race-enabled test suite against a throwaway redis-server;
# `make bench` runs the benchmark comparison (bench/, its own module).
GO ?= go
BENCHFLAGS ?=
TESTFLAGS ?=

.PHONY: test vet bench bench-quick gobench

test:
	scripts/with-redis.sh $(MAKE) --no-print-directory vet gotest

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

.PHONY: gotest
gotest:
	$(GO) test -race -count=1 $(TESTFLAGS) ./...
	cd bench && $(GO) test -count=1 ./...

# In-package Go benchmarks (uncontended lock+unlock vs a bare EVALSHA pair, contended handoff).
gobench:
	scripts/with-redis.sh $(GO) test -run '^$$' -bench . -benchtime 3s -count 5 .

bench:
	scripts/ensure-redis.sh
	cd bench && $(GO) run . $(BENCHFLAGS)

bench-quick:
	$(MAKE) --no-print-directory bench BENCHFLAGS=-quick
