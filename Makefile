# Strata: the two commands a new user runs are `make standalone` and `make test`.
# Everything here is idempotent: a second `make setup` with nothing changed takes about a second.

PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PROTOS  := $(wildcard proto/*.proto)
PROTO_PY := $(PROTOS:.proto=_pb2.py)
APT_STAMP := $(VENV)/.apt-installed
PYTEST_ARGS ?=

.PHONY: setup console standalone lint docs test bench proto clean-data clean

KJS_DIR   := tests/kafka/js
KJS_STAMP := $(KJS_DIR)/node_modules/.installed

CONSOLE_DIR   := console
CONSOLE_DEPS  := $(CONSOLE_DIR)/node_modules/.installed
CONSOLE_BUILT := $(CONSOLE_DIR)/dist/index.html
CONSOLE_SRC   := $(wildcard $(CONSOLE_DIR)/src/*.* $(CONSOLE_DIR)/src/*/*.*) $(CONSOLE_DIR)/index.html $(CONSOLE_DIR)/build.mjs

# Hot modules compiled to C extensions with mypyc, kept only where `strata perf` gained >= 15%
# (scripts/compile_hot.py; docs/benchmarks.md "Compiled hot modules"). Rebuilt only when one of
# their sources or the script changes; STRATA_PURE_PYTHON=1 runs their .py instead.
COMPILED_SRC   := cursor/managed_cursor.py cursor/ack_state.py   # = COMPILED in scripts/compile_hot.py
COMPILED_STAMP := build/mypyc/.built
# The tests of the compiled modules, run a second time in pure Python by `make test` (seconds).
PURE_TESTS     := tests/cursor/test_cursor_acks.py tests/cursor/test_compiled.py

setup: $(APT_STAMP) $(STAMP) $(PROTO_PY) $(KJS_STAMP) $(CONSOLE_BUILT) $(COMPILED_STAMP)

$(COMPILED_STAMP): $(COMPILED_SRC) scripts/compile_hot.py $(STAMP) $(PROTO_PY)
	$(VPY) scripts/compile_hot.py
	@touch $@

# Debian packages the project needs: PostgreSQL server binaries (tests start a real server),
# a JRE for Spark, Prometheus. Installed only when missing. The script checks each binary, so it
# is run again whenever it changes: a venv made before a package was added to it gets it too.
$(APT_STAMP): scripts/install-debian-deps.sh
	@mkdir -p $(VENV)
	@bash scripts/install-debian-deps.sh
	@touch $@

$(STAMP): pyproject.toml
	@test -x $(VPY) || $(PY) -m venv $(VENV)
	@$(VPY) -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
	$(VPY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

# kafkajs for tests/kafka (a Node client of the Kafka listener): exactly the versions in the committed lock
# file, reinstalled only when that file changes; node and npm come from scripts/install-debian-deps.sh.
$(KJS_STAMP): $(KJS_DIR)/package-lock.json $(APT_STAMP)
	cd $(KJS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The web console (console/): its npm packages, exactly as the committed lock file names them, and
# its build into console/dist (served by every broker at /console/). Rebuilt only when a source,
# the build script or the lock file changes; nothing is fetched at run time.
$(CONSOLE_DEPS): $(CONSOLE_DIR)/package-lock.json $(APT_STAMP)
	cd $(CONSOLE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(CONSOLE_BUILT): $(CONSOLE_DEPS) $(CONSOLE_SRC)
	cd $(CONSOLE_DIR) && npm run --silent build

console: $(CONSOLE_BUILT)

proto/%_pb2.py: proto/%.proto proto/build.py $(STAMP)
	$(VPY) proto/build.py

proto: $(STAMP)
	$(VPY) proto/build.py

standalone: setup
	$(VENV)/bin/strata standalone --data-dir ./data

# ruff (style, bugs) and mypy (types; configured in pyproject.toml), in seconds: `make test`
# runs them first, so a lint failure fails fast, before the suite starts any server.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The docs site (mkdocs.yml): docs/ built into site/ (gitignored) in strict mode, so a broken link
# or anchor, a page left out of the nav or a nav entry without its page fails. Needs no network.
# NO_MKDOCS_2_WARNING: the Material theme's end-of-life banner, printed on every build otherwise.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

test: lint docs
	$(VPY) -m pytest $(PYTEST_ARGS)
	STRATA_PURE_PYTHON=1 $(VPY) -m pytest -q $(PURE_TESTS)

# The bench extra (peer clients, matplotlib) and the peers themselves (Debian packages, only
# when missing: bench/install-peers.sh, also run by bench.run) are installed only for `make bench`.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(VPY) -m pip install -q --disable-pip-version-check -e '.[test,bench]'
	@touch $@

bench: setup $(BENCH_STAMP)
	$(VPY) -m bench.run $(BENCH_ARGS)

clean-data:
	rm -rf ./data

clean:
	rm -rf $(VENV) site build cursor/*.so proto/*_pb2*.py proto/*_pb2*.pyi $(KJS_DIR)/node_modules $(CONSOLE_DIR)/node_modules $(CONSOLE_DIR)/dist
