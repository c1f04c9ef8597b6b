# The two commands of the README: `make eval` and `make test`. Everything
# else is for development. Each target installs what it needs by itself.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NPM_STAMP := node_modules/.typed-eval-installed

.PHONY: help install test typecheck unit eval bench build clean

help:
	@echo "make eval    run the main job (DATA=... JOB=... OUT=...)"
	@echo "make test    install dependencies, type-check, run the tests"
	@echo "make bench   run the benchmarks and print their ratios"
	@echo "make build   compile TypeScript to dist/"

# Install when node_modules is missing or older than the lock file. Not
# `npm ci`: registries that do not serve every platform's optional binaries
# (rollup, llama.cpp) leave those out of the lock, and `npm ci` then refuses
# the lock as out of sync. `npm install --no-save` installs the locked
# versions and leaves the lock untouched.
$(NPM_STAMP): package.json package-lock.json
	npm install --no-save --no-audit --no-fund
	@touch $@

install: $(NPM_STAMP)

typecheck: $(NPM_STAMP)
	npx tsc -p tsconfig.json --noEmit

unit: $(NPM_STAMP)
	npx vitest run

test: typecheck unit

eval: $(NPM_STAMP)
	@echo "make eval: the batch runner is not built yet (issue 5); nothing was run." >&2
	@exit 2

bench: $(NPM_STAMP)
	npx tsx bench/run.ts $(BENCH)

build: $(NPM_STAMP)
	npx tsc -p tsconfig.build.json

clean:
	rm -rf dist node_modules/.vite
