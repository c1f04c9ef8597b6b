# The two commands of the README: `make eval` and `make test`. Everything
# else is for development. Each target installs what it needs by itself.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NPM_STAMP := node_modules/.typed-eval-installed

ACCOUNTS ?= accounts.json

.PHONY: help install test lint format typecheck unit eval serve bench build clean soak tiny-model

help:
	@echo "make eval    run the main job (DATA=... JOB=... OUT=... MODEL_PATH=... ARGS=...)"
	@echo "make test    install dependencies, type-check, run the tests"
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
$(NPM_STAMP): package.json package-lock.json
	npm install --no-save --no-audit --no-fund
	@touch $@

install: $(NPM_STAMP)

# Compiled JavaScript for eval, serve and bench: half the memory of running the
# sources through tsx. bin/typed-eval.js uses dist/ only while it is up to date.
BUILD_STAMP := dist/.built
SOURCES := $(shell find src -type f)
$(BUILD_STAMP): $(NPM_STAMP) $(SOURCES) tsconfig.json tsconfig.build.json
	npx tsc -p tsconfig.build.json
	@touch $@

typecheck: $(NPM_STAMP)
	npx tsc -p tsconfig.json --noEmit

# Biome: the formatter and the linter (biome.jsonc says which rules are off, and why). `make format` applies both.
lint: $(NPM_STAMP)
	npx biome check .

format: $(NPM_STAMP)
	npx biome check --write .

CHROMIUM ?= /usr/bin/chromium
# The tests spawn the CLI a few hundred times: compiled, a spawn takes half the CPU of one through tsx.
unit: $(NPM_STAMP) $(BUILD_STAMP)
	@test -x $(CHROMIUM) || echo "*** No Chromium at $(CHROMIUM): the browser tests of the HTML reports will be SKIPPED (apt-get install -y chromium) ***" >&2
	CHROMIUM_PATH=$(CHROMIUM) npx vitest run

test: lint typecheck unit

# The long variants of the reliability tests (test/reliability): 100 kills, 100,000
# fuzzed bodies, three minutes of load; then the packed package installed and run.
# About 30 minutes on two cores.
FAKETIME_LIB ?= /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
soak: $(NPM_STAMP) $(BUILD_STAMP)
	@test -e $(FAKETIME_LIB) || echo "*** No libfaketime: the wall-clock step case is SKIPPED (apt-get install -y faketime) ***" >&2
	SOAK=1 npx vitest run test/reliability
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
