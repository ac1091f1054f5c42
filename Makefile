# effectors: build, run, test. Needs only Go (and a C compiler for -race).
#
#   make run                 build, then run ea-node with an embedded NATS
#                            server storing in ./data (STORE=dir to change;
#                            ARGS='--log-level debug' for more flags)
#   make test                the whole test suite, with the race detector
#   make bench               benchmarks of ./bench, output also in bench.out
#   make fuzz                fuzz the record decoders, FUZZTIME each (30s)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO       ?= go
BIN      ?= bin
STORE    ?= ./data
ARGS     ?=
FUZZTIME ?= 30s
ROUNDS   ?= 5

.PHONY: all build run test bench fuzz vet clean

all: build

build:
	$(GO) build -o $(BIN)/ea-node ./cmd/node
	$(GO) build -o $(BIN)/ea-supervisor ./cmd/supervisor

run: build
	./$(BIN)/ea-node --store $(STORE) $(ARGS)

test:
	$(GO) test -race -count=1 -timeout 25m ./...

bench:
	bash bench/compare.sh $(ROUNDS) | tee bench.out

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzFromMsg$$' -fuzztime $(FUZZTIME) ./records/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./records/

vet:
	$(GO) vet ./...

clean:
	rm -rf $(BIN) bench.out
