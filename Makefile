# rlock: `make test` runs vet, staticcheck and the race-enabled test suite against a throwaway
# redis-server; then, TESTJOBS at a time, each on servers of its own: the root package's suite
# and the chaos test (internal/chaos) on a throwaway Redis Cluster and on a throwaway Sentinel
# deployment, short failover tests (internal/failover), and on each of SERVERS the root suite,
# the chaos test and the cluster smoke tests. `make bench` runs the benchmark comparison (bench/,
# its own module). otel/ (rlockotel) is a module of its own too, vetted and tested with the root.
GO ?= go
BENCHFLAGS ?=
TESTFLAGS ?=
CHAOSFLAGS ?= -chaos.duration=15s
CHAOSPAUSEFLAGS ?= -chaospause.duration=60s
CHAOSPAUSERUNS ?= 1
# Servers besides the system's Redis 7.0 that make test runs on (scripts/fetch-server.sh fetches
# each once into a cache).
SERVERS ?= redis-8.0 valkey-8.1

.PHONY: test test-servers test-deployments test-cluster test-sentinel test-failover test-chaos-pause vet bench bench-quick bench-cluster gobench chaos chaos-pause

# TESTJOBS: how many of the deployments' suites run at once. Each runs on servers of its own
# (free ports, a temp dir) and spends most of its time waiting for leases to pass: the root
# suite uses about a fifth of one core; the chaos tests and the fault tests' timings want the
# rest. Each gets a port range of its own (RLOCK_PORTS): a server a test restarts on its port
# must not find another suite's server there.
TESTJOBS ?= 2

test:
	scripts/with-redis.sh $(MAKE) --no-print-directory vet gotest
	for s in $(SERVERS); do scripts/fetch-server.sh $$s >/dev/null || exit 1; done
	$(MAKE) --no-print-directory -j$(TESTJOBS) --output-sync=target test-deployments

# The root suite and the chaos test on the Cluster, on Sentinel and on each of SERVERS, and the
# failover tests, as separate targets so that make -j runs them side by side, longest first.
test-deployments: test-cluster $(addprefix test-server-,$(SERVERS)) test-sentinel test-failover test-chaos-pause

# The root suite, the scripts' own tests (internal/wire: sharded pub/sub on a cluster) and the
# chaos test on a 3+3 Redis Cluster (TestClusterSmoke included) and on a Sentinel deployment (a
# primary, 2 replicas, 3 sentinels): every test checks that nothing is left subscribed on any
# node.
test-cluster:
	@set -e; t=$$(date +%s); RLOCK_PORTS=22000-23999 RLOCK_TEST_TOPOLOGY=cluster scripts/with-cluster.sh $(GO) test -race -count=1 -p 1 $(TESTFLAGS) . ./internal/wire ./internal/chaos; \
		echo "test-cluster: in $$(($$(date +%s) - t))s"
test-sentinel:
	@set -e; t=$$(date +%s); RLOCK_PORTS=24000-25999 RLOCK_TEST_TOPOLOGY=sentinel scripts/with-sentinel.sh $(GO) test -race -count=1 -p 1 $(TESTFLAGS) . ./internal/wire ./internal/chaos; \
		echo "test-sentinel: in $$(($$(date +%s) - t))s"

# Failovers, one round each, each on a deployment of its own: CLUSTER FAILOVER and kill -9 of
# the lock's master with a hold and waiters, kill -9 of it right after a hold (its replica,
# lacking the hold, takes over; the same for an election's term), and SENTINEL FAILOVER.
test-failover:
	@set -e; t=$$(date +%s); export RLOCK_PORTS=26000-27499; CLUSTER_NODE_TIMEOUT=2000 RLOCK_FAILOVER_ROUNDS=1 RLOCK_FAILOVER_KILL_ROUNDS=1 scripts/with-cluster.sh \
		$(GO) test -race -count=1 -run '^TestFailover_cluster(Graceful|Kill|Kill_lease6s|KillAfterHold|Election)$$' ./internal/failover; \
	RLOCK_FAILOVER_ROUNDS=1 scripts/with-sentinel.sh $(GO) test -race -count=1 -run '^TestFailover_sentinelInSync$$' ./internal/failover; \
		echo "test-failover: in $$(($$(date +%s) - t))s"

# The pause chaos test, short: every kind and an election under SIGSTOP past the lease,
# DEBUG SLEEP and connection kills, 10s per wait strategy (make chaos-pause runs it longer).
test-chaos-pause:
	@set -e; t=$$(date +%s); RLOCK_PORTS=31500-32767 scripts/with-redis.sh $(GO) test -race -count=1 -run '^TestChaosPause$$' ./internal/chaos \
		-args -chaospause.duration=10s; \
		echo "test-chaos-pause: in $$(($$(date +%s) - t))s"

# On each of SERVERS: the root suite and the chaos test on a throwaway server, the cluster smoke
# tests on a throwaway 3+3 cluster (with a throwaway standalone server of the same version beside
# it), and one graceful cluster failover with waiters (Redis 8 keeps a subscription that a stale
# slot map sent to the old master, now a replica, and lets it go only in READONLY mode).
test-servers: $(addprefix test-server-,$(SERVERS))
PORTS_redis-8.0 = 27500-29499
PORTS_valkey-8.1 = 29500-31499
test-server-%:
	@set -e; s=$*; t=$$(date +%s); export RLOCK_PORTS=$(or $(PORTS_$*),20000-32767); \
	RLOCK_SERVER=$$s scripts/with-redis.sh $(GO) test -race -count=1 -p 1 $(TESTFLAGS) . ./internal/chaos ; \
	echo "test-servers: $$s standalone suite in $$(($$(date +%s) - t))s"; t=$$(date +%s); \
	RLOCK_SERVER=$$s RLOCK_TEST_TOPOLOGY=cluster scripts/with-redis.sh scripts/with-cluster.sh \
		$(GO) test -race -count=1 $(TESTFLAGS) -run '^TestClusterSmoke' . ; \
	echo "test-servers: $$s cluster smoke in $$(($$(date +%s) - t))s"; t=$$(date +%s); \
	RLOCK_SERVER=$$s CLUSTER_NODE_TIMEOUT=2000 RLOCK_FAILOVER_ROUNDS=1 scripts/with-cluster.sh \
		$(GO) test -race -count=1 $(TESTFLAGS) -run '^TestFailover_clusterGraceful$$' ./internal/failover ; \
	echo "test-servers: $$s cluster failover in $$(($$(date +%s) - t))s"

# staticcheck, pinned; go run fetches and builds it once into the module cache.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd otel && $(GO) vet ./...
	$(STATICCHECK) ./...
	cd bench && $(STATICCHECK) ./...
	cd otel && $(STATICCHECK) ./...

.PHONY: gotest
gotest:
	# -p 1: packages share one server, and the chaos and fault tests kill every connection on it.
	$(GO) test -race -count=1 -p 1 $(TESTFLAGS) ./...
	cd bench && $(GO) test -count=1 ./...
	cd otel && $(GO) test -race -count=1 ./...

# The chaos test alone, longer than in make test: 4 configurations of 15s each by default
# (make chaos CHAOSFLAGS='-chaos.duration=60s' for more; -chaos.faults=false for a baseline).
chaos:
	scripts/with-redis.sh $(GO) test -race -count=1 -run '^TestChaos$$' -v ./internal/chaos -args $(CHAOSFLAGS)

# The chaos test with stopped processes (SIGSTOP past the lease and past FairWaitTimeout) and a
# stalled server (DEBUG SLEEP) besides connection kills: every kind, pub/sub then spin, 60s each
# by default, CHAOSPAUSERUNS times (make chaos-pause CHAOSPAUSERUNS=10; CHAOSPAUSEFLAGS=
# '-chaospause.duration=10s' for short runs, '-chaospause.faults=stop,kill' for a baseline
# without losses). One summary line per run. Not part of make test.
chaos-pause:
	scripts/with-redis.sh $(GO) test -race -timeout 0 -count=$(CHAOSPAUSERUNS) -run '^TestChaosPause$$' -v ./internal/chaos -args $(CHAOSPAUSEFLAGS)

# In-package Go benchmarks (uncontended lock+unlock vs a bare EVALSHA pair, contended handoff).
gobench:
	scripts/with-redis.sh $(GO) test -run '^$$' -bench . -benchtime 3s -count 5 .

bench:
	scripts/ensure-redis.sh
	cd bench && $(GO) run . $(BENCHFLAGS)

bench-quick:
	$(MAKE) --no-print-directory bench BENCHFLAGS=-quick

# The benchmark on a throwaway 3 master + 3 replica Redis Cluster that it starts and stops
# (scripts/with-cluster.sh); BENCHFLAGS as for bench, e.g. BENCHFLAGS=-quick.
bench-cluster:
	scripts/ensure-redis.sh
	cd bench && $(GO) run . -topology cluster $(BENCHFLAGS)
