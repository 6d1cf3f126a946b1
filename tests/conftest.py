"""Shared fixtures: the default engine and engines on policies built from spec overrides."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, settings
from prunewarden import Engine, Policy, parse_policy

# Property tests check behaviour, not speed: no per-example wall-clock deadline (200 ms by
# default) and no too-slow health check, which a loaded 2-core CI machine can trip. A test that
# states its own settings keeps them (the fuzz tests keep a deadline far above their cost).
settings.register_profile(
    "prunewarden", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("prunewarden")

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
