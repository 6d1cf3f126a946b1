"""Explained decisions of sessions and passes: ``explain=True`` on every ``Session`` call that
decides, ``Engine.plan``, ``AsyncSession`` and ``AsyncEngine.plan``; a gated refusal is not
explained, and explaining changes neither the session nor its records."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from prunewarden import Engine, UntrustedEvictionError
from prunewarden.aio import AsyncEngine
from prunewarden.audit import AuditLog, decision_rows

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "examples" / "inputs"
DECISION = Draft202012Validator(
    json.loads((ROOT / "schemas" / "decision.v1.schema.json").read_text(encoding="utf-8"))
)
PLAIN_EXPLANATION: dict[str, Any] = {"mode": "enforce", "rules": [], "rule_backend": None}
SEGMENT = {"id": "t1", "kind": "turn", "text": "ran it", "tombstone_written": True}
# Cycles whose spread stays under the default floor (0.08): the third halts (no canary pinned).
NARROW = [{"a": 0.5, "b": 0.52, "c": 0.51}, {"a": 0.5, "b": 0.51, "c": 0.52}] * 2


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((INPUTS / name).read_text(encoding="utf-8"))
    return loaded


def window() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        (ROOT / "examples" / "windows" / "free-30k-tokens.json").read_text(encoding="utf-8")
    )
    return loaded


def would_allow(decision: Any) -> list[list[dict[str, Any]]]:
    """Each reason's would_allow (a reason without one: absent from the list)."""
    return [r.detail["would_allow"] for r in decision.reasons if "would_allow" in r.detail]


class TestSessionCalls:
    def test_authorize_explained(self, engine: Engine) -> None:
        """authorize(explain=True): the unstable score's alternatives and the explanation."""
        decision = engine.session("s").authorize(SEGMENT, 0.44, 0.75, ["t1"], explain=True)
        (reason,) = decision.reasons
        assert reason.code == "unstable_score"
        assert reason.detail["would_allow"][0] == {
            "field": "spec.eviction.stability_delta",
            "op": ">=",
            "value": 0.31,
        }
        assert decision.explanation == PLAIN_EXPLANATION
        assert list(DECISION.iter_errors(decision.to_dict())) == []

    def test_plain_calls_stay_plain(self, engine: Engine) -> None:
        """Without explain, a session's decision has no would_allow and no explanation."""
        decision = engine.session("s").authorize(SEGMENT, 0.44, 0.75, ["t1"])
        assert (decision.explanation, would_allow(decision)) == (None, [])

    def test_prune_explained_through_evaluate(self, engine: Engine) -> None:
        """evaluate(staleness, explain=True) explains the prune: every refusing reason."""
        decision = engine.session("s").evaluate(
            example("staleness-summary-orphans.json"), explain=True
        )
        assert decision.outcome == "deny"
        assert decision.explanation == PLAIN_EXPLANATION
        assert all("would_allow_text" in r.detail for r in decision.reasons)

    def test_verify_explained(self, engine: Engine) -> None:
        """verify(explain=True): the dropped pinned segment's repair as would_allow."""
        document = example("transition-trim-dropped-task.json")
        decision = engine.session("s").verify(document["before"], document["after"], explain=True)
        pinned = next(r for r in decision.reasons if r.code == "pinned_removed")
        assert {"field": "after", "op": "contains", "value": ["m1"]} in pinned.detail["would_allow"]
        assert decision.explanation == PLAIN_EXPLANATION

    def test_observe_cycle_explained(self, engine: Engine) -> None:
        """observe_cycle(explain=True): the halt's spread alternative."""
        session = engine.session("s")
        session.observe_cycle(NARROW[0])
        session.observe_cycle(NARROW[1])
        decision = session.observe_cycle(NARROW[2], explain=True)
        (reason,) = decision.reasons
        assert (decision.outcome, reason.code) == ("halt", "no_canary")
        assert reason.detail["would_allow"][0]["field"] == "spec.collapse.spread_floor"
        assert decision.explanation == PLAIN_EXPLANATION

    def test_enforce_raises_with_the_explained_decision(self, engine: Engine) -> None:
        """enforce(explain=True) raises as enforce does, carrying the explained decision."""
        document = {"check": "eviction", "segment": SEGMENT, "score": 0.44}
        document |= {"perturbed_score": 0.75, "eviction_candidates": ["t1"]}
        with pytest.raises(UntrustedEvictionError) as info:
            engine.session("s").enforce(document, explain=True)
        assert info.value.decision.explanation == PLAIN_EXPLANATION

    def test_a_gated_refusal_is_not_explained(self, engine: Engine) -> None:
        """While the session is halted, authorize answers pruning_halted unexplained: no
        guard or rule ran, so there is nothing to invert or trace."""
        session = engine.session("s")
        for scores in NARROW[:3]:
            session.observe_cycle(scores)
        assert session.halted
        decision = session.authorize(SEGMENT, 0.1, 0.1, ["t1"], explain=True)
        assert decision.codes == ("pruning_halted",)
        assert (decision.explanation, would_allow(decision)) == (None, [])

    def test_explaining_changes_neither_state_nor_outcomes(self) -> None:
        """The same calls, explained or not, leave the same session state and log the same
        records but for the reasons' would_allow: same outcomes, codes, verdicts and plan."""

        def run(*, explain: bool) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
            sink = io.StringIO()
            session = Engine.default(audit=AuditLog(sink, fsync="never")).session("s")
            session.observe_cycle(NARROW[0], explain=explain)
            session.authorize(SEGMENT, 0.44, 0.75, ["t1"], explain=explain)
            session.plan(window()["segments"], free_tokens=30_000, explain=explain)
            records = [json.loads(line) for line in sink.getvalue().splitlines()]
            logged = [
                (
                    r["kind"],
                    r.get("outcome"),
                    # (a version 3 pass's reasons are bitmasks: its rows say its codes)
                    [x["code"] for x in r.get("reasons", ())] if r["kind"] != "pass" else None,
                    # A pass (columns, or verdicts when explained): each decision's outcome
                    # and codes.
                    [(d["outcome"], [x["code"] for x in d["reasons"]]) for d in decision_rows(r)]
                    if r["kind"] == "pass"
                    else None,
                    r.get("plan"),
                )
                for r in records
            ]
            return session.state(), logged

        assert run(explain=True) == run(explain=False)


class TestPlans:
    def test_engine_plan_explains_every_decision(self, engine: Engine) -> None:
        """Engine.plan(explain=True): each decision of the pass has its explanation, and each
        refusing reason of a guard its would_allow."""
        plan = engine.plan(window(), explain=True)
        assert plan.decisions
        assert all(d.explanation == PLAIN_EXPLANATION for d in plan.decisions)
        refused = [d for d in plan.decisions if d.blocks]
        assert refused
        assert all(would_allow(d) or d.reasons[0].code == "pinned" for d in refused)
        assert all(not list(DECISION.iter_errors(d.to_dict())) for d in plan.decisions)

    def test_a_plain_plan_is_unchanged(self, engine: Engine) -> None:
        """An explained plan evicts exactly what the plain one does."""
        plain, explained = engine.plan(window()), engine.plan(window(), explain=True)
        assert (explained.evict, explained.pinned, explained.tombstones) == (
            plain.evict,
            plain.pinned,
            plain.tombstones,
        )
        assert all(d.explanation is None for d in plain.decisions)


class TestAsync:
    def test_async_session_and_plan_pass_explain_on(self) -> None:
        """AsyncSession.authorize, evaluate and AsyncEngine.plan take explain as the sync ones."""

        async def calls() -> tuple[Any, Any, Any]:
            engine = AsyncEngine.default()
            session = await engine.session("s")
            authorized = await session.authorize(SEGMENT, 0.44, 0.75, ["t1"], explain=True)
            evaluated = await session.evaluate(
                example("eviction-buf-definition.json"), explain=True
            )
            plan = await engine.plan(window(), explain=True)
            return authorized, evaluated, plan

        authorized, evaluated, plan = asyncio.run(calls())
        assert authorized.reasons[0].detail["would_allow"]
        assert evaluated.reasons[0].detail["would_allow"] == [
            {"field": "spec.eviction.pinned_kinds", "op": "excludes", "value": "definition"}
        ]
        assert all(d.explanation is not None for d in plan.decisions)
