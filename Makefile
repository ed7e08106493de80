# Bolide — build, test and measure.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
BIN       := bin
# BUILD_TAGS: build tags of the binaries. grpcnotrace leaves out gRPC's
# request tracing pages (golang.org/x/net/trace, off unless a program turns
# grpc.EnableTracing on, which Bolide never does): 4.6 MB less per daemon
# and about 2.5 MiB less resident at idle (docs/BENCHMARKS.md, "What the
# resident executable is made of").
BUILD_TAGS ?= grpcnotrace
GOBUILD    = $(GO) build -tags '$(BUILD_TAGS)'

.PHONY: all build test race lint fuzz bench bench-store bench-restart disk-limits clean proto run cluster-up cluster-down e2e

all: lint test

## build: compile every package (binaries land in bin/ once cmd/ exists)
build:
	$(GO) build $(PKGS)
	@if [ -d cmd ]; then mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...; fi

## test: vet, then the whole test suite with the race detector. Four test
## binaries at a time (-p 4, not one per CPU): many packages spend most of
## their time waiting on real processes, timeouts and timers, and with two
## at a time the machine's two vCPUs were 60 % idle through the run.
test: lint
	$(GO) test -race -count=1 -p 4 -timeout 15m $(PKGS)

## race: the suite under the race detector, twice, to shake out flakes
race:
	$(GO) test -race -count=2 -timeout 20m $(PKGS)

## lint: gofmt and go vet must be clean
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '\.pb\.go$$' || true); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## fuzz: run every Fuzz target for FUZZTIME each: a duration (10s) or an execution
## count (20000x). CI uses a count: Go 1.26's fuzz coordinator can report a
## spurious "context deadline exceeded" when a duration ends on a loaded machine.
## Targets are found in the test sources (no test binary is built to list them).
## Targets that create files run on tmpfs when /dev/shm exists: fsync there
## is free, so each run explores far more inputs.
FUZZ_TMPDIR := $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo $${TMPDIR:-/tmp})
fuzz:
	@set -e; $(GO) list -f '{{.ImportPath}} {{.Dir}}' $(PKGS) | while read -r pkg dir; do \
	  for f in $$(cat $$dir/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p'); do \
	    echo "== $$pkg $$f"; \
	    TMPDIR=$(FUZZ_TMPDIR) $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg </dev/null; \
	  done; \
	done

## compat: Apache RocketMQ's own clients and admin tool against Bolide clusters
## (needs Java 17 and Maven; dependencies come from the Go module proxy and
## Maven Central on first use). `make compat` runs them in two lanes side by
## side (scripts/compat.sh: the JVM suites one after another, the others one
## after another), printing each suite's output whole when it ends; each
## target below runs one suite alone. One target per client:
##   compat-go       rocketmq-client-go (test/rocketmq-go, its own pinned go.mod)
##   compat-java     rocketmq-client 5.x (test/rocketmq-java, a Maven module)
##   compat-mqadmin  rocketmq-tools' mqadmin commands and their output
##   compat-v5       the RocketMQ 5 gRPC client rocketmq-clients/golang/v5
##                   (test/rocketmq-v5, its own pinned go.mod)
##   compat-node     RocketMQ 5's Node.js client, rocketmq-client-nodejs 1.0.8 over gRPC
##                   (test/rocketmq-nodejs; needs Node.js 20+ and npm; npm ci from the lock file)
##   compat-java5    RocketMQ 5's Java client, rocketmq-client-java 5.2.0 over gRPC
##                   (test/rocketmq-java5, a Maven module)
.PHONY: compat compat-go compat-java compat-mqadmin compat-v5 compat-node compat-java5
compat:
	bash scripts/compat.sh
compat-go:
	bash scripts/compat-go.sh
compat-v5:
	bash scripts/compat-v5.sh
compat-java:
	bash scripts/compat-java.sh
compat-mqadmin:
	bash scripts/compat-mqadmin.sh
compat-node:
	bash scripts/compat-node.sh
compat-java5:
	bash scripts/compat-java5.sh

## bench-remoting: the broker's CPU per message over RocketMQ's remoting protocol
## (rocketmq-client-go) against its framed protocol (bolide bench), one broker
.PHONY: bench-remoting
bench-remoting:
	bash scripts/bench-remoting.sh

## bench-dedup: the broker's CPU per message and the send rate with the
## deduplication window on and off (scripts/bench-dedup.sh)
.PHONY: bench-dedup
bench-dedup:
	bash scripts/bench-dedup.sh

## pop-faults: POP consumption under kill -9 at full size: 100 000 messages
## (some in message groups on a FIFO topic and group), 4 v5 simple
## consumers acking 90 % and letting 10 % run out of invisibility once,
## the broker killed and restarted three times; every message acked
## exactly once, FIFO order per message group (RMQV5_POP_N sets the size;
## compat-v5 runs a short form)
POP_N ?= 100000
.PHONY: pop-faults
pop-faults:
	RMQV5_POP_N=$(POP_N) TIMEOUT=60m GO_TEST_FLAGS="-run ^TestPopUnderFaults$$ -v" bash scripts/compat-v5.sh

## bench-v5: the broker's CPU per message over the RocketMQ 5 gRPC protocol
## (16 v5 producers, 4 simple consumers, 1 KiB) against Bolide's SDK with the
## same load (scripts/bench-v5.sh)
.PHONY: bench-v5
bench-v5:
	bash scripts/bench-v5.sh

## sql-e2e: SQL92 filters end to end at full size (issue 22): push and pull
## consumers with an SQL92 condition over a mixed stream of SQL_E2E_N
## messages get exactly the matching ones and their offsets reach the end
## (make test runs it with 10 000)
SQL_E2E_N ?= 100000
.PHONY: sql-e2e
sql-e2e:
	BOLIDE_SQL_E2E_N=$(SQL_E2E_N) $(GO) test -count=1 -run '^TestSQL92Selector$$' -timeout 20m ./client/

## bench-filter: the cost of SQL92 filtering (scripts/bench-filter.sh): a
## backlog of N messages (default 10 000 000, 1 % matching) consumed whole
## and through a selective SQL92 filter; messages/s and broker CPU seconds
.PHONY: bench-filter
bench-filter:
	bash scripts/bench-filter.sh

## bench: every Go benchmark (storage engine figures for docs/BENCHMARKS.md)
bench:
	$(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) -benchmem $(PKGS)

## bench-store: the storage engine benchmarks and the recovery measurement
bench-store:
	$(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) ./commitlog/ ./consumequeue/ ./indexfile/ ./message/ ./broker/store/
	BOLIDE_RECOVERY_BENCH=1 $(GO) test -run='^TestRecoveryTimeLargeLog$$' -v -timeout 30m ./broker/store/

# The bench-* scripts below build Bolide's binaries the way `release` does
# (static, -trimpath, stripped: bench_go_build in scripts/bench-lib.sh, whose
# flags follow release's), so that they measure the binaries users deploy.

## bench-vs-nats: Bolide and NATS JetStream side by side in one run on this
## machine (scripts/bench-vs-nats.sh: builds nats-server and natscli into
## .bench/ once, prints a markdown table); QUICK=1 checks it in a minute or two
.PHONY: bench-vs-nats
bench-vs-nats:
	bash scripts/bench-vs-nats.sh

## bench-vs-rocketmq: Bolide and Apache RocketMQ side by side in one run on this
## machine, the same RocketMQ Java client (test/bench-rocketmq) against both
## (scripts/bench-vs-rocketmq.sh: needs Java 17+ and Maven; builds RocketMQ's
## classpath into .bench/ once, prints a markdown table); QUICK=1 checks it in
## two or three minutes
.PHONY: bench-vs-rocketmq
bench-vs-rocketmq:
	bash scripts/bench-vs-rocketmq.sh

## bench-ab: two builds of Bolide alternated on the bench-vs-nats workloads,
## a fresh broker per run (scripts/bench-ab.sh): make bench-ab A=<revision>
## [B=<revision>; default the work tree]; prints medians of throughput and of
## broker CPU per message, and B / A
.PHONY: bench-ab
bench-ab:
	@test -n "$(A)" || { echo "usage: make bench-ab A=<revision> [B=<revision>]" >&2; exit 2; }
	bash scripts/bench-ab.sh $(A) $(B)

## bench-scale: how the broker's cost grows with topics, consumer groups, a
## cold backlog and delayed traffic (scripts/bench-scale.sh: real processes,
## prints a markdown table against issue 21's targets); QUICK=1 checks it in
## about two minutes
.PHONY: bench-scale
bench-scale:
	bash scripts/bench-scale.sh

## bench-restart: SIGKILL a broker sending to 10 000 topics, restart it on a
## cold page cache, report how long it took to listen again (as root)
bench-restart:
	bash scripts/bench-restart.sh

## disk-limits: this machine's raw disk figures (dd, fio) for comparison
disk-limits:
	bash scripts/disk-limits.sh

## run: build, then a NameServer and one broker on loopback in the foreground
## (data in ./data); Ctrl-C stops both cleanly. Ports and the rest as in
## scripts/run.sh: make run NAMESRV_PORT=19876 BROKER_PORT=20911 (DATA_DIR and
## SEGMENT_SIZE too)
run: build
	@scripts/run.sh

## cluster-up / cluster-down: a local cluster of real processes (NameServer,
## broker-a, broker-b) under CLUSTER_DIR (default ./data/cluster); see the
## scripts for the ports and other settings
cluster-up: build
	@scripts/cluster-up.sh

cluster-down:
	@scripts/cluster-down.sh

## failover-demo: automatic failover on loopback (scripts/failover-demo.sh):
## 3 NameServers with controllers, 3 brokers of one group; the master is
## killed and `bolide controller status` shown before and after
.PHONY: failover-demo
failover-demo: build
	@scripts/failover-demo.sh

## e2e: the end-to-end suite: real binaries started by scripts/cluster-up.sh,
## driven through bin/bolide only (test/e2e). The cluster lives in a fresh
## directory under $$TMPDIR, stopped afterwards even if the test binary dies;
## it is removed after a pass and kept (its logs) after a failure.
E2E_TIMEOUT ?= 5m
e2e:
	@mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...
	@dir=$$(mktemp -d "$${TMPDIR:-/tmp}/bolide-e2e.XXXXXX"); \
	BOLIDE_E2E_DIR=$$dir BOLIDE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/; \
	status=$$?; \
	CLUSTER_DIR=$$dir/cluster scripts/cluster-down.sh >/dev/null 2>&1 || true; \
	if [ $$status -eq 0 ]; then rm -rf "$$dir"; else echo "e2e failed: cluster logs in $$dir/cluster"; fi; \
	exit $$status

## e2e-tls: the whole end-to-end suite with every daemon in --tls-mode
## enforcing, with a CA and a server certificate the test makes, and the CLI
## over TLS verified with that CA (BOLIDE_TLS=1 BOLIDE_TLS_CA=...); gossip
## encrypted. e2e-acl: the same with ACL on as well (one admin user, its
## keys in BOLIDE_ACCESS_KEY/BOLIDE_SECRET_KEY for the CLI).
.PHONY: e2e-tls e2e-acl
e2e-tls:
	@$(MAKE) --no-print-directory e2e-secured E2E_SECURITY='BOLIDE_E2E_TLS=enforcing'
e2e-acl:
	@$(MAKE) --no-print-directory e2e-secured E2E_SECURITY='BOLIDE_E2E_TLS=enforcing BOLIDE_E2E_ACL=1'
.PHONY: e2e-secured
e2e-secured:
	@mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...
	@dir=$$(mktemp -d "$${TMPDIR:-/tmp}/bolide-e2e.XXXXXX"); \
	env $(E2E_SECURITY) BOLIDE_E2E_DIR=$$dir BOLIDE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/; \
	status=$$?; \
	for c in $$dir/cluster*; do CLUSTER_DIR=$$c scripts/cluster-down.sh >/dev/null 2>&1 || true; done; \
	if [ $$status -eq 0 ]; then rm -rf "$$dir"; else echo "e2e ($(E2E_SECURITY)) failed: cluster logs in $$dir"; fi; \
	exit $$status

## e2e-console: the console's browser tests (test/console, build tag browser):
## Debian's chromium, headless, driven through chromedp against a NameServer
## and a broker of the real binaries, loading the NameServer's console: every
## page with real data, a message found by key, a dead letter replayed from
## the page and consumed, a topic created from the page, no error in the
## browser's log; the render time of the topics and groups tables with 500
## topics and 200 groups and the memory the console adds to an idle daemon,
## logged (SCALE and MEMORY lines). No browser is a failure here, not a skip
## (chromium on PATH, or BOLIDE_CHROMIUM). console-screenshots runs the same
## test writing one PNG per page into docs/console/.
E2E_CONSOLE_TIMEOUT ?= 5m
.PHONY: e2e-console console-screenshots
e2e-console:
	@mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...
	BOLIDE_REQUIRE_BROWSER=1 BOLIDE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags browser -count=1 -timeout $(E2E_CONSOLE_TIMEOUT) -v ./test/console/
console-screenshots:
	@mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...
	BOLIDE_REQUIRE_BROWSER=1 BOLIDE_CONSOLE_SCREENSHOTS=docs/console BOLIDE_BIN=$(CURDIR)/$(BIN) \
	  $(GO) test -tags browser -count=1 -timeout $(E2E_CONSOLE_TIMEOUT) -v -run '^TestConsole$$' ./test/console/

clean:
	rm -rf $(BIN)

## proto: regenerate proto/bolidev1 from proto/bolide/v1/*.proto
## (protoc from Debian's protobuf-compiler; plugins pinned as go tools)
proto:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler"; exit 1; }
	$(GO) build -o $(BIN)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	$(GO) build -o $(BIN)/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc
	@tmp=$$(mktemp -d) && \
	protoc -I proto --plugin=$(BIN)/protoc-gen-go --plugin=$(BIN)/protoc-gen-go-grpc \
	  --go_out=$$tmp --go_opt=paths=source_relative \
	  --go-grpc_out=$$tmp --go-grpc_opt=paths=source_relative \
	  proto/bolide/v1/*.proto && \
	mkdir -p proto/bolidev1 && cp $$tmp/bolide/v1/*.pb.go proto/bolidev1/ && rm -rf $$tmp

## bench-delay: delayed delivery at full size (issue: delayed delivery):
## horizon (1 000 000 timers over 400 virtual days, engine and store),
## precision (20 000 msg/s, delays 1–60 s), burst (1 000 000 due at once),
## scale (10 000 000 pending) and crash (30 kill -9 cycles), each asserting
## the issue's bound and logging its figures. Real processes; needs ~10 GB
## of disk and ~20 minutes.
.PHONY: bench-delay
bench-delay:
	BOLIDE_DELAY_BENCH=1 $(GO) test -count=1 -v -timeout 60m -run '^TestHorizonVirtualClock$$' ./broker/delay/
	BOLIDE_DELAY_BENCH=1 $(GO) test -count=1 -v -timeout 60m -run '^TestTimerHorizonThroughStore$$' ./broker/
	BOLIDE_DELAY_BENCH=1 $(GO) test -count=1 -v -timeout 60m -run '^TestDelay(Precision|Burst|Scale|Crash)$$' ./internal/cluster/

## soak: one hour of mixed traffic against real processes (sends, consumes,
## delay levels and timers, transactions, retries and dead letters) with the
## broker restarted every ten minutes, kill -9 and SIGTERM in turn; fails if
## an acknowledged message is lost, a rolled-back one consumed or a delayed
## one early, or if the broker's anonymous memory, goroutines or open files
## at the end of the last ten minutes are not within 10 % of their value at
## the end of the first ten (the rule: internal/cluster/soak_test.go).
## BOLIDE_SOAK_DURATION (1h), BOLIDE_SOAK_RESTART_EVERY (10m),
## BOLIDE_SOAK_SAMPLE_EVERY (1m), BOLIDE_SOAK_RATE (100 plain msg/s) and
## BOLIDE_SOAK_CSV (samples as CSV) tune it. Not part of `make test` or CI.
SOAK_TIMEOUT ?= 3h
.PHONY: soak
soak:
	@mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...
	BOLIDE_SOAK=1 BOLIDE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' ./internal/cluster/

## chaos: the failover chaos suite at full size (internal/chaos, issue 18):
## 3 NameServers with controllers and 3 brokers of one group as real
## processes, 8 SDK producers with per-key sequences; kill -9 of the master
## (30 cycles), SIGSTOP for 20 s, the master cut from controllers and slaves,
## the controller leader killed during a failover and with the master,
## async replication; checks lost, duplicated, out-of-order, two masters,
## replica divergence and prints failover times. chaos-short is the CI form
## (a few cycles each, about 5 minutes). CHAOS_ONLY (a regexp) picks
## scenarios; CHAOS_REPORT appends the summary table to a file.
CHAOS_TIMEOUT ?= 120m
CHAOS_ONLY ?=
CHAOS_REPORT ?=
.PHONY: chaos chaos-short
chaos:
	@mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...
	BOLIDE_CHAOS=long BOLIDE_BIN=$(CURDIR)/$(BIN) BOLIDE_CHAOS_ONLY='$(CHAOS_ONLY)' BOLIDE_CHAOS_REPORT='$(CHAOS_REPORT)' \
	  $(GO) test -count=1 -v -timeout $(CHAOS_TIMEOUT) -run '^TestChaos$$' ./internal/chaos/
chaos-short:
	@mkdir -p $(BIN) && $(GOBUILD) -o $(BIN)/ ./cmd/...
	BOLIDE_CHAOS=short BOLIDE_BIN=$(CURDIR)/$(BIN) BOLIDE_CHAOS_ONLY='$(CHAOS_ONLY)' BOLIDE_CHAOS_REPORT='$(CHAOS_REPORT)' \
	  $(GO) test -count=1 -v -timeout 15m -run '^TestChaos$$' ./internal/chaos/

## release: static (CGO_ENABLED=0) binaries of the daemons and the CLI for
## linux/amd64 and linux/arm64, with VERSION embedded (`--version` prints
## it), in dist/bolide-VERSION-OS-ARCH/ plus a .tar.gz and SHA256SUMS.
## Not part of `make test`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
.PHONY: release
release:
	@set -e; rm -rf dist; mkdir -p dist; for p in $(RELEASE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; name=bolide-$(VERSION)-$$os-$$arch; \
	  echo "== $$name"; mkdir -p dist/$$name; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GOBUILD) -trimpath \
	    -ldflags "-s -w -X github.com/bolide-mq/bolide/cmd/internal/daemon.Version=$(VERSION)" \
	    -o dist/$$name/ ./cmd/bolide-nameserver ./cmd/bolide-broker ./cmd/bolide; \
	  cp -r scripts/systemd dist/$$name/; cp docs/config.md docs/deploy.md dist/$$name/; \
	  tar -C dist -czf dist/$$name.tar.gz $$name; \
	done; cd dist && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

## bench-security: what ACL and TLS cost, side by side on one broker
## (scripts/bench-security.sh): bolide bench send throughput and the
## broker's CPU seconds per message with ACL and TLS (enforcing) off and
## on, runs alternating; figures for docs/BENCHMARKS.md
.PHONY: bench-security
bench-security:
	bash scripts/bench-security.sh
