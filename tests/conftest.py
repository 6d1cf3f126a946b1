"""Shared fixtures: the default engine and engines on policies built from spec overrides; a
policy file and a real ``prunewarden serve`` for the server tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.server import Server, running_server
from prunewarden import Engine, Policy, parse_policy

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
