"""FleetStatus counts decisions by outcome: a pass read from its columns counts as its
decisions would, one by one."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping
from typing import Any

from prunewarden import AuditLog, Decision, Engine, PassResult, parse_policy
from prunewarden.engine import DecisionHook
from prunewarden.server._fleet import OUTCOMES, FleetStatus


def pass_items(count: int) -> list[dict[str, Any]]:
    """Eviction items alternating between allowed and refused (no tombstone)."""
    return [
        {
            "segment": {"id": f"s{i}", "kind": "turn", "tombstone_written": i % 2 == 0},
            "score": 0.08,
            "perturbed_score": 0.1,
        }
        for i in range(count)
    ]


class OneByOne:
    """Outcomes counted by a plain per-decision hook, and the passes FleetStatus was handed."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()

    def __call__(self, decision: Decision, _record: Mapping[str, Any]) -> None:
        self.outcomes[decision.outcome] += 1


class SpiedFleet(FleetStatus):
    """FleetStatus remembering which passes reached on_pass."""

    def __init__(self) -> None:
        super().__init__()
        self.passes: list[PassResult] = []

    def on_pass(self, result: PassResult) -> None:
        self.passes.append(result)
        super().on_pass(result)


AUDIT_MODE = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: dry, version: 1.0.0}
spec:
  eviction: {mode: audit}
"""


class TestPassCounts:
    def test_columns_count_as_decisions_do(self) -> None:
        """A columnar pass, a pass of the general path and a pass refused by an unwritable
        log count the same outcomes through on_pass as a per-decision hook counts."""
        fleet, single = SpiedFleet(), OneByOne()
        hooks: list[DecisionHook] = [fleet, single]
        Engine.default(audit=AuditLog(io.StringIO()), on_decision=hooks).authorize_pass(
            pass_items(9)
        )
        Engine(parse_policy(AUDIT_MODE, "dry.yaml"), on_decision=hooks).authorize_pass(
            pass_items(4)
        )
        unwritable = io.StringIO()
        refusing = Engine.default(audit=AuditLog(unwritable), on_decision=hooks)
        unwritable.close()
        refusing.authorize_evictions(pass_items(3))
        counted = {outcome: fleet._outcomes[outcome] for outcome in OUTCOMES}
        assert counted == {outcome: single.outcomes[outcome] for outcome in OUTCOMES}
        assert counted == {"allow": 7, "deny": 9, "halt": 0}
        assert [len(result) for result in fleet.passes] == [9, 4, 3]
        assert [result.record["record_version"] for result in fleet.passes if result.record] == [
            3,
            2,
            3,
        ]
