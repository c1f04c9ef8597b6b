# The two commands of the README: `make eval` and `make test`. Everything
# else is for development. Each target installs what it needs by itself.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NPM_STAMP := node_modules/.typed-eval-installed

# Node: the lines the suite passes on (package.json's engines says the same).
# NODE=22|24|26 runs every target on that line, fetched from the npm registry
# (node-<os>-<cpu>@NODE, the official build's bin/node) into .cache/node/NODE.
# Without NODE: the machine's Node when it is one of these lines, else 24.
TESTED_NODE := 22 24 26
DEFAULT_NODE := 24
ifeq ($(origin NODE),environment)
  # npm scripts export NODE as a path: only a line number chooses.
  ifeq ($(filter $(NODE),$(TESTED_NODE)),)
    NODE :=
  endif
endif
ifeq ($(NODE),)
  ifeq ($(filter $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null),$(TESTED_NODE)),)
    NODE := $(DEFAULT_NODE)
  endif
endif
ifneq ($(NODE),)
  ifeq ($(shell [[ "$(NODE)" =~ ^[0-9]+$$ ]] && echo ok),)
    $(error NODE takes a Node major version such as 24 (tested: $(TESTED_NODE)), not "$(NODE)")
  endif
  NODE_PLATFORM := $(subst Linux,linux,$(subst Darwin,darwin,$(shell uname -s)))-$(subst x86_64,x64,$(subst aarch64,arm64,$(shell uname -m)))
  NODE_HOME := $(CURDIR)/.cache/node/$(NODE)
  NODE_BIN := $(NODE_HOME)/bin/node
  # Every recipe (npm, npx and the #!/usr/bin/env node of bin/typed-eval.js) finds this Node first.
  export PATH := $(NODE_HOME)/bin:$(PATH)
endif

ACCOUNTS ?= accounts.json

.PHONY: help install test lint format typecheck unit eval serve bench build clean soak tiny-model node node-line

help:
	@echo "make eval    run the main job (DATA=... JOB=... OUT=... MODEL_PATH=... ARGS=...)"
	@echo "make test    install dependencies, type-check, run the tests (NODE=22/24/26: on that Node, fetched from npm;"
	@echo "             CPU_VARIANT=x64: on that variant of llama.cpp's CPU kernels, as another CPU runs them)"
	@echo "make serve   run the HTTP API on 127.0.0.1:8787 (creates a dev key on first run)"
	@echo "make bench   run the benchmarks and print their ratios"
	@echo "make soak    the long reliability tests (kills, faults, fuzzing, load)"
	@echo "make build   compile TypeScript to dist/"
	@echo "make tiny-model  write models/tiny-test.gguf, a random-weight model for trying everything offline"

# Install when node_modules is missing or older than the lock file. Not
# `npm ci`: registries that do not serve every platform's optional binaries
# (rollup, llama.cpp) leave those out of the lock, and `npm ci` then refuses
# the lock as out of sync. `npm install --no-save` installs the locked
# versions and leaves the lock untouched.
$(NPM_STAMP): package.json package-lock.json | $(NODE_BIN)
	npm install --no-save --no-audit --no-fund
	@touch $@

# The npm package of an official Node build: `npm pack` checks its integrity against the registry;
# only bin/node is kept (about 120 MB unpacked). Delete .cache/node to fetch the line's latest again.
$(NODE_BIN):
	@rm -rf $(NODE_HOME).tmp && mkdir -p $(NODE_HOME).tmp
	@echo "Fetching Node $(NODE) from the npm registry (node-$(NODE_PLATFORM)@$(NODE)) into .cache/node/$(NODE)" >&2
	@cd $(NODE_HOME).tmp && npm pack --silent "node-$(NODE_PLATFORM)@$(NODE)" >/dev/null \
	  || { echo "*** no Node $(NODE) for $(NODE_PLATFORM) in the npm registry: install Node $(DEFAULT_NODE) (tested: $(TESTED_NODE)) yourself and run make without NODE ***" >&2; exit 1; }
	@cd $(NODE_HOME).tmp && tar xzf node-*.tgz --strip-components=1 package/bin/node package/LICENSE && rm node-*.tgz
	@rm -rf $(NODE_HOME) && mv $(NODE_HOME).tmp $(NODE_HOME)
	@echo "Node $$($@ --version) in .cache/node/$(NODE)" >&2

install: $(NPM_STAMP)

# Which Node the targets run on, and how to use it outside make (`make -s node-line`: its major alone, for .ci/run).
node-line:
	@echo $(or $(NODE),$(shell node -p 'process.versions.node.split(".")[0]'))
node: $(NODE_BIN)
	@echo "make runs $$(command -v node) ($$(node --version)); for npx and the CLI outside make: export PATH=\"$(if $(NODE_HOME),$(NODE_HOME)/bin:)\$$PATH\""

# Compiled JavaScript for eval, serve and bench: half the memory of running the
# sources through tsx. bin/typed-eval.js uses dist/ only while it is up to date.
BUILD_STAMP := dist/.built
SOURCES := $(shell find src -type f)
# BUILD_FLAGS=--noCheck emits without type-checking (the same files, in half the time): `make test` passes it,
# since its typecheck, run beside the build, already checks every file of src/.
$(BUILD_STAMP): $(NPM_STAMP) $(SOURCES) tsconfig.json tsconfig.build.json
	npx tsc -p tsconfig.build.json $(BUILD_FLAGS)
	@touch $@

typecheck: $(NPM_STAMP)
	npx tsc -p tsconfig.json --noEmit

# Biome: the formatter and the linter (biome.jsonc says which rules are off, and why). `make format` applies both.
lint: $(NPM_STAMP)
	npx biome check .

format: $(NPM_STAMP)
	npx biome check --write .

CHROMIUM ?= /usr/bin/chromium
# The S3 tests run against Ceph RGW from Debian's packages, started by the tests (test/support/rgw-setup.ts).
CEPH_PROGRAMS := ceph-mon ceph-osd radosgw radosgw-admin monmaptool osdmaptool
CEPH_MISSING = $(foreach p,$(CEPH_PROGRAMS),$(if $(shell PATH="$$PATH:/usr/sbin:/usr/bin" command -v $(p)),,$(p)))
# The tests spawn the CLI a few hundred times: compiled, a spawn takes half the CPU of one through tsx.
unit: $(NPM_STAMP) $(BUILD_STAMP)
	@test -x $(CHROMIUM) || echo "*** No Chromium at $(CHROMIUM): the browser tests of the HTML reports will be SKIPPED (apt-get install -y chromium) ***" >&2
	@$(if $(strip $(CEPH_MISSING)),echo "*** No Ceph RGW ($(strip $(CEPH_MISSING)) not found): the S3 tests against a real store will be SKIPPED (apt-get install -y radosgw ceph-mon ceph-osd ceph-common) ***" >&2,true)
	CHROMIUM_PATH=$(CHROMIUM) npx vitest run

# CPU_VARIANT=x64 (or sse42, sandybridge, ivybridge, piledriver, haswell...: a libggml-cpu-<variant>.so of
# node_modules/@node-llama-cpp/linux-x64/bins/linux-x64) runs the tests on that build of llama.cpp's CPU kernels
# instead of the best one this CPU runs, as a CPU of that family would (test/support/cpu-variant.mjs):
# `make test CPU_VARIANT=ivybridge` is the suite as a CPU without FMA or AVX2 runs it (x64, plain SSE2, takes three
# times the CPU on the f32 test model: an idle machine). Linux, Node 22.15 or later. docs/development.md has the figures.
ifneq ($(CPU_VARIANT),)
unit soak: export TYPED_EVAL_TEST_CPU_VARIANT := $(CPU_VARIANT)
unit soak: export NODE_OPTIONS := $(strip $(NODE_OPTIONS) --import=$(CURDIR)/test/support/cpu-variant.mjs)
endif

# Lint, type-check and build side by side (each mostly one core), then the tests.
test: $(NPM_STAMP)
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck build BUILD_FLAGS=--noCheck
	@$(MAKE) --no-print-directory unit

# The long variants of the reliability tests (test/reliability): 100 kills, 100,000
# fuzzed bodies, three minutes of load; then the packed package installed and run.
# About 30 minutes on two cores.
# Every test file with a long variant: test/reliability and the others that read SOAK.
SOAK_TESTS := test/reliability $(filter-out test/reliability/%,$(shell grep -rl 'process.env\["SOAK"\]' test --include='*.test.ts'))
FAKETIME_LIB ?= /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
soak: $(NPM_STAMP) $(BUILD_STAMP)
	@test -e $(FAKETIME_LIB) || echo "*** No libfaketime: the wall-clock step case is SKIPPED (apt-get install -y faketime) ***" >&2
	@$(if $(strip $(CEPH_MISSING)),echo "*** No Ceph RGW ($(strip $(CEPH_MISSING)) not found): the S3 tests against a real store will be SKIPPED (apt-get install -y radosgw ceph-mon ceph-osd ceph-common) ***" >&2,true)
	SOAK=1 npx vitest run $(SOAK_TESTS)
	PACKAGE_TEST=1 npx vitest run test/package

# The main job: the bundled ticket-triage example unless DATA/JOB/OUT say otherwise.
# The default model downloads on first use; offline, set MODEL_PATH to a local GGUF.
DATA ?= examples/data/tickets.jsonl
JOB ?= jobs/support-triage.json
OUT ?= out/eval.jsonl
eval: $(BUILD_STAMP)
	./bin/typed-eval.js run $(DATA) --job $(JOB) --output $(OUT) $(if $(MODEL_PATH),--model-path $(MODEL_PATH)) $(ARGS)

# A 0.4 MB random-weight model (the tests' TINY) for trying every command offline:
# `make eval MODEL_PATH=models/tiny-test.gguf`. Its answers are meaningless.
TINY_MODEL := models/tiny-test.gguf
tiny-model: $(TINY_MODEL)
$(TINY_MODEL): $(NPM_STAMP) test/support/tiny-model.ts test/support/models.ts test/support/gguf.ts
	npx tsx test/support/tiny-model.ts $@

# First run: create a development account and print its key once.
serve: $(BUILD_STAMP)
	@test -f $(ACCOUNTS) || { echo "No $(ACCOUNTS) yet: creating account 'dev'. Your API key (shown once):" >&2; ./bin/typed-eval.js keys create --account dev --accounts-file $(ACCOUNTS); }
	./bin/typed-eval.js serve --accounts-file $(ACCOUNTS) $(ARGS)

bench: $(BUILD_STAMP)
	npx tsx bench/run.ts $(BENCH)

build: $(BUILD_STAMP)

clean:
	rm -rf dist node_modules/.vite
