"""Shared fixtures: the default engine and engines on policies built from spec overrides; a
policy file and a real ``prunewarden serve`` for the server tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.server import Server, running_server
from _support.time_limit import pytest_addoption, pytest_runtest_makereport
from hypothesis import HealthCheck, settings
from prunewarden import Engine, Policy, parse_policy

__all__ = ["pytest_addoption", "pytest_runtest_makereport"]  # the 30 s limit of one test
# Each test's CPU seconds in the JUnit report; make test's two workers given whole files, the
# longest first (docs/dev/testing.md).
pytest_plugins = ["_support.cpu_time", "_support.scheduling"]

# Hypothesis profiles (docs/dev/testing.md). Property tests check behaviour, not speed: no
# per-example wall-clock deadline and no too-slow health check, which a loaded 2-core machine
# can trip; a test that states its own settings keeps them.
#  - ci, the default: derandomized, so a commit passes or fails the same way on every run and
#    machine; no example database (nothing saved by an earlier run is replayed); a failure prints
#    its reproduction blob.
#  - fuzz (make fuzz: --hypothesis-profile=fuzz --hypothesis-seed=N): random exploration seeded
#    by N, which the run prints, with PRUNEWARDEN_FUZZ_SCALE times Hypothesis' 100 examples.
FUZZ_SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
_QUIET_ON_A_LOADED_MACHINE = [HealthCheck.too_slow]
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=_QUIET_ON_A_LOADED_MACHINE,
)
settings.register_profile(
    "fuzz",
    derandomize=False,
    database=None,
    print_blob=True,
    deadline=None,
    max_examples=100 * FUZZ_SCALE,
    suppress_health_check=_QUIET_ON_A_LOADED_MACHINE,
)
settings.load_profile("ci")


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """A failed random run (make fuzz) ends with the seed that reproduces it."""
    seed = config.getoption("--hypothesis-seed")
    if seed is not None and exitstatus != 0:
        terminalreporter.write_line(
            f"Hypothesis seed of this run: {seed} (again: make fuzz FUZZ_SEED={seed}; "
            "docs/dev/testing.md turns a counterexample into an @example regression)"
        )


PolicyFactory = Callable[..., Policy]
EngineFactory = Callable[..., Engine]


def policy_text(spec: Mapping[str, Any], *, name: str = "test", version: str = "1.0.0") -> str:
    """The YAML text of a minimal policy stating only ``spec`` (every other field defaults)."""
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": name, "version": version},
        "spec": dict(spec),
    }
    return yaml.safe_dump(document, sort_keys=False)


@pytest.fixture
def engine() -> Engine:
    """An engine on the bundled default policy (the seeds' thresholds)."""
    return Engine.default()


@pytest.fixture
def make_policy() -> PolicyFactory:
    """Build a policy from spec overrides: ``make_policy(collapse={"spread_floor": 0.125})``."""

    def build(**spec: Any) -> Policy:
        return parse_policy(policy_text(spec), "<test-policy>")

    return build


@pytest.fixture
def engine_with(make_policy: PolicyFactory) -> EngineFactory:
    """An engine on a policy built from spec overrides, through ``parse_policy`` text."""

    def build(**spec: Any) -> Engine:
        return Engine(make_policy(**spec))

    return build


# --- prunewarden serve (tests/server/): a policy file and a real server shared by a module -----

# Collapse halts after two cycles under the floor; evictions need a perturbed score and a
# tombstone; every guard enforces.
SERVED_SPEC = {
    "collapse": {"consecutive_cycles": 2, "spread_floor": 0.1, "canary_margin": 0.2},
    "eviction": {"require_perturbation": True, "require_tombstone": True},
}


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(policy_text(SERVED_SPEC, name="served", version="1.0.0"), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server(policy_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server on a loopback port for the tests of a module."""
    with running_server(policy_file, tmp_path_factory.mktemp("server")) as running:
        yield running
