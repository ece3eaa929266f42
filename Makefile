# Every target runs through uv; `make help` lists them.
.DEFAULT_GOAL := help
SHELL := /bin/bash
UV := $(shell scripts/uv.sh)
export UV_LOCKED := 1
# The interpreter: Debian's python3.11 where it is installed with its headers, else the first
# Python 3.11 uv finds. Debian builds it with profile-guided and link-time optimisation; the
# router serves more requests on it than on a plain source build (docs/decisions.md). Set
# UV_PYTHON to choose another.
DEBIAN_PYTHON := $(and $(wildcard /usr/bin/python3.11),$(wildcard /usr/include/python3.11/Python.h))
export UV_PYTHON ?= $(if $(DEBIAN_PYTHON),/usr/bin/python3.11,3.11)

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: setup
setup: node_modules/.installed ## install Python dependencies (uv.lock), anvil, cast, esbuild and uPlot (package-lock.json); build the native executor and the dashboard's bundle
	$(UV) sync --locked
	scripts/native.sh .venv/bin/python
	scripts/dashboard.sh

# anvil and cast, real EVM node and client for the demo and the tests, and the dashboard's chart
# library and bundler, from npm.
node_modules/.installed: package.json package-lock.json
	scripts/npm-tools.sh
	touch $@

.PHONY: demo
demo: setup ## run a demo: three anvil nodes, two providers, router and API (Ctrl-C stops it)
	$(UV) run python scripts/demo.py

.PHONY: test
test: setup ## run the whole test suite: the native crate's own tests, then pytest in two processes, each test module whole in one (starts local PostgreSQL and Redis if they are down, installs Debian's chromium for the dashboard's browser tests)
	scripts/native.sh .venv/bin/python test
	scripts/services.sh
	scripts/browser.sh
	$(UV) run pytest -n 2 --dist loadfile

.PHONY: lint
lint: setup ## ruff lint and format check; rustfmt and clippy on the native executor
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	cd native && cargo fmt --check && cargo clippy --quiet --release --all-targets -- -D warnings

.PHONY: typecheck
typecheck: setup ## mypy --strict
	$(UV) run mypy
	$(UV) run mypy scripts

.PHONY: check
check: lint typecheck test ## everything CI runs

.PHONY: format
format: setup ## apply ruff's fixes and formatting
	$(UV) run ruff check --fix .
	$(UV) run ruff format .

.PHONY: schema
schema: setup ## regenerate docs/operator-config.schema.json
	$(UV) run chainrouter apply --print-schema > docs/operator-config.schema.json

.PHONY: bench
bench: setup ## run the benchmarks; results go to bench/results/
	scripts/services.sh
	scripts/bench-deps.sh
	$(UV) run python -m bench.run
	$(UV) run python -m bench.transport
	$(UV) run python -m bench.router
	$(UV) run python -m bench.mixed
	$(UV) run python -m bench.pipeline
	$(UV) run python -m bench.audits
	$(UV) run python -m bench.faults
	$(UV) run python -m bench.websocket
	$(UV) run python -m bench.cache
	$(UV) run python -m bench.cache_redis_budget
	$(UV) run python -m bench.verification
	$(UV) run python -m bench.usage
	$(UV) run python -m bench.companion
	$(UV) run python -m bench.bounds
	$(UV) run python -m bench.deployment

.PHONY: image
image: setup ## an OCI image of the service with buildah, from a Debian base made by debootstrap (docs/deployment.md)
	scripts/image.sh build

.PHONY: image-smoke
image-smoke: setup ## build the image if needed, then run it in its root filesystem: --help, migrate, serve answering /health
	scripts/image.sh smoke

.PHONY: migration
migration: setup ## write a new migration from schema.py changes: make migration m="what changed"
	@test -n "$(m)" || { echo 'usage: make migration m="what changed"'; exit 2; }
	mkdir -p var && rm -f var/autogen.db*
	$(UV) run python -c "import sys; from chainrouter.stores.sql import migrate, engine; \
	  migrate.create_revision(engine.create_database_engine('sqlite:///var/autogen.db'), sys.argv[1])" "$(m)"
	rm -f var/autogen.db*
