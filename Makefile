# The two commands of the README: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test soak bench lint java clean compile mutation mutation-authz

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "Spark needs Java 17: install it with 'apt-get update && apt-get install -y openjdk-17-jre-headless'" >&2; \
	  exit 2; }

# Every node, CLI verb and Spark worker is a new Python process: with bytecode written
# once here, none compiles the project's modules again (PYTHONDONTWRITEBYTECODE=1 would
# otherwise make each of them do it, ~0.2 s of CPU per node start). The replay's scan is
# also compiled by mypyc (tools/replay/compiled.py: used only while current; without a C
# compiler the replay runs it interpreted).
compile: $(STAMP)
	$(BIN)/python -m compileall -q raft metadata broker tools tests bench
	$(BIN)/python -m tools.replay.compiled

demo: compile java
	$(BIN)/kraft demo

# Three workers, a test file each: most tests wait on processes, sockets and fsyncs, so
# three keep 2 cores ~94% busy (532 s against 593 s on two workers, the same suite).
test: compile java
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --durations=30

soak: $(STAMP) java
	HYPOTHESIS_PROFILE=soak $(BIN)/python -m pytest -q -m soak
	HYPOTHESIS_PROFILE=soak $(BIN)/python -m pytest -q tests/property tests/unit

# compiled first, as for the tests: the benches time node starts and restarts
bench: compile
	$(BIN)/python -m bench

# Mutation testing of the checkers (not part of `make test`); stops by itself within
# 25 minutes. MUTATION_ARGS=--worktree mutates the working tree instead of HEAD.
mutation: $(STAMP)
	$(BIN)/python tests/mutation/run.py $(MUTATION_ARGS)

# Each gated row of the authorization table turned OPEN in a scratch copy, its real-process
# test run against it (about 20 rows, ~10 s each): every mutant must be killed.
mutation-authz: $(STAMP)
	$(BIN)/python tests/mutation/access_table.py

lint: $(STAMP)
	$(BIN)/ruff check raft metadata broker tools tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
	find raft metadata broker tools tests bench -name __pycache__ -prune -exec rm -rf {} +
