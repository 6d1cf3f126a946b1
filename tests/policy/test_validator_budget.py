"""Guardrail validators run under the budget rules run under: a hostile one refuses the policy
quickly instead of passing it after seconds of work."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from prunewarden import PolicyError, load_policy

HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: guarded, version: 1.0.0}\n"
WALL_BOUND_SECONDS = 3.0  # the refusal takes milliseconds; the search it refuses took seconds


def random_ab(size: int) -> str:
    table = bytes(0x61 + (i & 1) for i in range(256))
    rng = random.Random(19)  # noqa: S311 - test data, not secrets
    return rng.randbytes(size).translate(table).decode("ascii")


class TestValidatorBudget:
    def test_an_over_budget_validator_refuses(self, tmp_path: Path) -> None:
        """A validator whose search could outrun its budget refuses the policy (fail closed),
        where its result, computed after the deadline, used to pass it."""
        validator = {
            "name": "no-pattern",
            "message": "m",
            "expression": "!spec.params.blob.matches('[ab]*a[ab]{1000}c')",
        }
        spec = {"params": {"blob": random_ab(100_000)}, "validators": [validator]}
        path = tmp_path / "p.yaml"
        path.write_text(HEADER + "spec: " + json.dumps(spec) + "\n", encoding="utf-8")
        started = time.monotonic()
        with pytest.raises(PolicyError) as info:
            load_policy(path)
        seconds = time.monotonic() - started
        (problem,) = info.value.problems
        assert problem.path == "$.spec.validators"
        assert problem.message.startswith("validator 'no-pattern' of ")
        assert "could not be evaluated (matches() on 100000 characters could take" in (
            problem.message
        )
        assert seconds < WALL_BOUND_SECONDS
