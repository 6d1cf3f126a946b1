# The two set-up commands of the README: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint typecheck pytest clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --upgrade pip

# Installed markers: re-install when the project's metadata changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -qq -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -qq -e '.[test]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	@PATH="$(CURDIR)/$(BIN):$$PATH" sh examples/demo.sh

test: lint typecheck pytest

lint: $(VENV)/.installed-test
	$(BIN)/ruff check engine tests examples
	$(BIN)/ruff format --check engine tests examples

typecheck: $(VENV)/.installed-test
	mkdir -p build/typecheck && ln -sfn ../../engine build/typecheck/prunewarden
	$(BIN)/mypy -p prunewarden
	$(BIN)/mypy tests examples

pytest: $(VENV)/.installed-test
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build dist .demo *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
