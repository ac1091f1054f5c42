# effectors: build, run, test. Needs only Go (and a C compiler for -race).
#
#   make run                 build, then run ea-node with an embedded NATS
#                            server storing in ./data (STORE=dir to change;
#                            ARGS='--log-level debug' for more flags) and
#                            ea-supervisor beside it (SUPERVISOR_ARGS=...);
#                            their agents ask EA_LLM_BASE_URL's model, the
#                            built-in scripted one when it is unset;
#                            once they serve, prints what to try with bin/ea
#   make test                the whole test suite, with the race detector
#   make bench               benchmarks of ./bench, output also in bench.out
#   make fuzz                fuzz the record decoders and the control and
#                            orchestration request decoders, FUZZTIME each (30s)
#   make torture             the long form of the fault-injection suite
#                            (torture/): 3 nodes, a supervisor and a
#                            nats-server as processes, every fault, ROUNDS
#                            rounds (TORTURE_ROUNDS, 3); output also in
#                            torture.out, the recovery table appended to
#                            torture.md

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO       ?= go
BIN      ?= bin
STORE    ?= ./data
ARGS     ?=
SUPERVISOR_ARGS ?=
FUZZTIME ?= 30s
ROUNDS   ?= 5

.PHONY: all build run test bench fuzz torture vet clean

all: build

build:
	$(GO) build -o $(BIN)/ea-node ./cmd/node
	$(GO) build -o $(BIN)/ea-supervisor ./cmd/supervisor
	$(GO) build -o $(BIN)/ea ./cmd/ea

# run starts ea-node (embedded NATS on 127.0.0.1:4222, hosting the example
# kinds and the demo's workers) and ea-supervisor connected to it. Ctrl-C
# reaches both (they stop gracefully); if one exits on its own with an
# error, the other is stopped. Once ready, each prints what to try with the
# ea CLI (bin/ea). With EA_LLM_BASE_URL unset, both get the built-in
# scripted model (EA_LLM_BASE_URL=scripted:), so that the agent kinds can be
# tried with no model, no network and no key; each logs a WARN saying so,
# and every answer starts with "[scripted model]". EA_LLM_BASE_URL set (to
# an API, or empty for no model at all) is left as it is.
run: build
	@export EA_LLM_BASE_URL="$${EA_LLM_BASE_URL-scripted:}"; \
	./$(BIN)/ea-node --store $(STORE) $(ARGS) & node=$$!; \
	./$(BIN)/ea-supervisor $(SUPERVISOR_ARGS) & sup=$$!; \
	trap : INT TERM; first=0; \
	while kill -0 $$node 2>/dev/null && kill -0 $$sup 2>/dev/null; do wait -n $$node $$sup && first=0 || first=$$?; done; \
	if [ $$first != 0 ] && [ $$first -lt 128 ]; then kill -TERM $$node $$sup 2>/dev/null || true; fi; \
	n=0; s=0; wait $$node || n=$$?; wait $$sup || s=$$?; \
	if [ $$n != 0 ] || [ $$s != 0 ]; then \
		echo "make run: ea-node exited with status $$n, ea-supervisor with $$s" >&2; exit 1; \
	fi

# test builds the binaries that process tests run (ea-node, ea-supervisor,
# ea) once, with the race detector, into $(BIN)/race, and points
# internal/proctest at them (PROCTEST_BINARIES): otherwise every package
# whose tests start them links its own. It also builds nats-server (the
# version go.mod pins, without the race detector) and has bus/bustest run
# each test's server as a process of its own (EA_TEST_NATS_SERVER): a real
# nats-server as deployed, whose code the race detector then does not
# instrument: the tests took 17% less CPU (BENCHMARKS.md, "Test suite").
# The test binaries are linked without DWARF debugging information
# (-ldflags=-w): linking the 45 of them took 29% less CPU, and race reports
# and panics still name every function, file and line. Four packages build
# or run at once (-p 4, where go test's default is one per core): many
# tests wait on leases, timers and processes, and with two the cores were
# idle a third of the time (522 s -> 392 s on 2 cores; BENCHMARKS.md).
test:
	$(GO) build -race -o $(BIN)/race/ ./cmd/node ./cmd/supervisor ./cmd/ea
	$(GO) build -o $(BIN)/nats-server github.com/nats-io/nats-server/v2
	EA_TEST_NATS_SERVER=$(abspath $(BIN)/nats-server) PROCTEST_BINARIES=$(abspath $(BIN)/race) \
		$(GO) test -race -ldflags=-w -p 4 -count=1 -timeout 25m ./...

bench:
	bash bench/compare.sh $(ROUNDS) | tee bench.out

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzFromMsg$$' -fuzztime $(FUZZTIME) ./records/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./records/
	$(GO) test -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZTIME) ./internal/service/
	$(GO) test -run '^$$' -fuzz '^FuzzControlRequest$$' -fuzztime $(FUZZTIME) ./actor/
	$(GO) test -run '^$$' -fuzz '^FuzzOrchRequest$$' -fuzztime $(FUZZTIME) ./supervisor/

# torture runs the fault-injection suite's long form (its short form runs in
# make test). Without the race detector, so that recovery times are the
# binaries' own; TORTURE_FAULTS=stop-node,cut-node picks faults.
TORTURE_ROUNDS ?= 3
torture:
	TORTURE=long TORTURE_ROUNDS=$(TORTURE_ROUNDS) TORTURE_REPORT=$(CURDIR)/torture.md \
		$(GO) test -count=1 -timeout 60m -v -run '^TestTorture' ./torture/ 2>&1 | tee torture.out

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN) bench.out torture.out torture.md

# Graph engine vs LangGraph.js (needs Node.js and npm; not part of make test).
.PHONY: bench-graph
bench-graph:
	cd bench/langgraph && npm install --no-audit --no-fund
	bash bench/langgraph/compare.sh | tee bench-graph.out
