"""Rule pins are session state: saved with the pass that made them, restored, bound to a policy."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from prunewarden import (
    Decision,
    Engine,
    Policy,
    ReloadingEngine,
    SessionStateError,
    SqliteSessionStore,
)
from prunewarden._schemas import validator

PolicyFactory = Callable[..., Policy]

PIN_NEVER = [
    {
        "name": "pin-never",
        "check": "eviction",
        "when": "segment.text.contains('never')",
        "effect": "pin",
        "message": "states a negation",
    }
]
PINNED_TEXT = "never log tokens"


def seg(seg_id: str, score: float, text: str | None = None) -> dict[str, Any]:
    """A bound, stable turn of 100 tokens."""
    text = text if text is not None else f"text of {seg_id}"
    return {
        "id": seg_id,
        "kind": "turn",
        "text": text,
        "tokens": 100,
        "score": score,
        "perturbed_score": score,
        "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    }


WINDOW = [seg("n", 0.0625, PINNED_TEXT), seg("a", 0.25), seg("b", 0.125), seg("c", 0.75)]


def pinning_policy(version: str) -> str:
    """The YAML of a policy whose one rule pins segments stating a negation."""
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "agent", "version": version},
        "spec": {"rules": PIN_NEVER},
    }
    return yaml.safe_dump(document, sort_keys=False)


def eviction_decisions(heard: list[Decision]) -> list[tuple[str, tuple[str, ...]]]:
    return [(d.outcome, d.codes) for d in heard if d.check == "eviction"]


@pytest.fixture
def pinning(make_policy: PolicyFactory) -> Policy:
    return make_policy(rules=PIN_NEVER)


class TestState:
    def test_state_holds_the_pin_bound_to_text_and_policy(self, pinning: Policy) -> None:
        """After a pass pins a segment, state() names it with the digest of its text and the
        digest of the policy whose rule pinned it, and validates as session-state.v4."""
        session = Engine(pinning).session("s")
        session.plan(WINDOW, free_tokens=100)
        state = json.loads(json.dumps(session.state()))
        assert state["state_version"] == 4
        assert list(validator("session-state").iter_errors(state)) == []
        text_digest = "sha256:" + hashlib.sha256(PINNED_TEXT.encode()).hexdigest()
        assert state["rule_pins"] == {"policy": pinning.digest, "segments": {"n": text_digest}}

    def test_a_restored_session_keeps_the_pin(self, pinning: Policy) -> None:
        """A session restored from the state lists the segment as pinned without deciding it
        again."""
        first = Engine(pinning).session("s")
        first.plan(WINDOW, free_tokens=100)
        state = first.state()
        heard: list[Decision] = []
        engine = Engine(pinning, on_decision=lambda d, _: heard.append(d))
        plan = engine.session("s", state=state).plan(WINDOW, free_tokens=100)
        assert plan.pinned == ("n",)
        assert plan.evict == ("b",)
        assert eviction_decisions(heard) == [("allow", ("authorized",))]

    def test_an_unknown_version_is_refused(self, pinning: Policy) -> None:
        """A state version this reader does not know is refused at $.state_version."""
        state = Engine(pinning).session("s").state()
        state["state_version"] = 5
        with pytest.raises(SessionStateError) as raised:
            Engine(pinning).session("s", state=state)
        assert "$.state_version" in [p.path for p in raised.value.problems]

    def test_a_malformed_text_digest_is_located(self, pinning: Policy) -> None:
        """A pin whose digest is not sha256:<64 hex> is refused with its path."""
        state = Engine(pinning).session("s").state()
        state["rule_pins"] = {"policy": pinning.digest, "segments": {"n": "md5:abc"}}
        with pytest.raises(SessionStateError) as raised:
            Engine(pinning).session("s", state=state)
        assert [p.path for p in raised.value.problems] == ["$.rule_pins.segments.n"]


class TestAnotherPolicy:
    def test_a_restore_under_another_policy_drops_the_pins(
        self, pinning: Policy, make_policy: PolicyFactory
    ) -> None:
        """Under another policy the pin is dropped, not refused: the restore succeeds, the
        session_rebound record names rule_pins under dropped, and the new policy's rules decide
        the segment (here it has none, so it is evicted)."""
        first = Engine(pinning).session("s")
        first.plan(WINDOW, free_tokens=100)
        other = make_policy(eviction={"stability_delta": 0.2})
        logger = structlog.testing.CapturingLogger()
        restored = Engine(other, logger=logger).session("s", state=first.state())
        (record,) = [c.kwargs for c in logger.calls if c.args == ("session_rebound",)]
        assert list(record["dropped"]) == ["rule_pins"]
        assert "halt" in record["kept"]
        assert restored.state()["rule_pins"] == {"policy": None, "segments": {}}
        assert restored.plan(WINDOW, free_tokens=100).evict == ("n",)

    def test_a_reload_to_another_policy_decides_the_segment_afresh(self, tmp_path: Path) -> None:
        """After a reload, the new policy's rule decides the pinned segment again (one refusal
        logged under the new version), then pins it for the passes after."""
        path = tmp_path / "agent.yaml"
        path.write_text(pinning_policy("1.0.0"), encoding="utf-8")
        heard: list[Decision] = []
        with ReloadingEngine(path, interval=0, on_decision=lambda d, _: heard.append(d)) as engine:
            session = engine.session("s")
            session.plan(WINDOW, free_tokens=100)
            path.write_text(pinning_policy("1.1.0"), encoding="utf-8")
            assert engine.reload().changed
            heard.clear()
            again = session.plan(WINDOW, free_tokens=100)
            later = session.plan(WINDOW, free_tokens=100)
        refused = [(d.policy.version, d.codes) for d in again.decisions if d.refused]
        assert refused == [("1.1.0", ("rule:pin-never",))]
        assert later.pinned == ("n",)
        assert not [d for d in later.decisions if d.refused]


class TestStore:
    def test_a_pin_survives_a_new_engine_on_the_store(
        self, pinning: Policy, tmp_path: Path
    ) -> None:
        """The pass that pins saves the state before it returns: an engine opened afterwards on
        the same file pins the segment without deciding it."""
        with SqliteSessionStore(tmp_path / "s.db") as store:
            Engine(pinning, store=store).session("s").plan(WINDOW, free_tokens=100)
            heard: list[Decision] = []
            engine = Engine(pinning, store=store, on_decision=lambda d, _: heard.append(d))
            plan = engine.session("s").plan(WINDOW, free_tokens=100)
        assert plan.pinned == ("n",)
        assert eviction_decisions(heard) == [("allow", ("authorized",))]

    def test_a_pass_that_pins_nothing_new_does_not_save(
        self, pinning: Policy, tmp_path: Path
    ) -> None:
        """A pass whose pins are those already kept writes nothing to the store."""

        class CountingStore(SqliteSessionStore):
            saves = 0

            def save(self, session_id: str, state: Any) -> None:
                CountingStore.saves += 1
                super().save(session_id, state)

        with CountingStore(tmp_path / "s.db") as store:
            session = Engine(pinning, store=store).session("s")
            session.plan(WINDOW, free_tokens=100)
            after_pin = CountingStore.saves
            session.plan(WINDOW, free_tokens=100)
            assert CountingStore.saves == after_pin


class TestTransitionsFollowTheWindow:
    def test_an_allowed_removal_drops_the_pin_and_saves_it(
        self, pinning: Policy, tmp_path: Path
    ) -> None:
        """An allowed edit that tombstones a rule-pinned segment drops its pin from the session
        and from the store: an engine opened afterwards on the file holds no pin."""
        after = [s for s in WINDOW if s["id"] != "n"]
        with SqliteSessionStore(tmp_path / "s.db") as store:
            session = Engine(pinning, store=store).session("s")
            session.plan(WINDOW, free_tokens=100)
            decision = session.verify(WINDOW, after, tombstones=["n"])
            reopened = Engine(pinning, store=store).session("s")
            assert (decision.outcome, decision.codes) == ("allow", ("transition_clean",))
            assert session.rule_pins.segments == {}
            assert reopened.state()["rule_pins"]["segments"] == {}

    def test_a_refused_removal_keeps_the_pin(self, pinning: Policy, tmp_path: Path) -> None:
        """An edit refused for removing a rule-pinned segment without a tombstone keeps the pin,
        in the session and in the store."""
        after = [s for s in WINDOW if s["id"] != "n"]
        with SqliteSessionStore(tmp_path / "s.db") as store:
            session = Engine(pinning, store=store).session("s")
            session.plan(WINDOW, free_tokens=100)
            decision = session.verify(WINDOW, after)
            reopened = Engine(pinning, store=store).session("s")
            assert decision.outcome == "deny"
            assert "pinned_removed" in decision.codes
            assert set(session.rule_pins.segments) == {"n"}
            assert set(reopened.state()["rule_pins"]["segments"]) == {"n"}
