"""Fixtures of the server tests: a policy file, and a real server on loopback shared by a module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.server import Server, policy_text, running_server

# Collapse halts after two cycles under the floor; evictions need a perturbed score and a
# tombstone; every guard enforces.
SPEC = {
    "collapse": {"consecutive_cycles": 2, "spread_floor": 0.1, "canary_margin": 0.2},
    "eviction": {"require_perturbation": True, "require_tombstone": True},
}


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(policy_text(SPEC, name="served", version="1.0.0"), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server(policy_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server on a loopback port for the tests of a module."""
    with running_server(policy_file, tmp_path_factory.mktemp("server")) as running:
        yield running
