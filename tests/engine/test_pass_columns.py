"""Engine.authorize_pass: the columns, decisions built only where read, the on_pass hook, and a
pass whose record cannot be written."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import structlog
from prunewarden import AuditLog, Decision, Engine, PassResult
from prunewarden.audit import decision_rows
from prunewarden.pipeline import Pipeline


def item(segment_id: str, *, tombstone: bool = True, depends: Sequence[str] = ()) -> dict[str, Any]:
    segment = {
        "id": segment_id,
        "kind": "turn",
        "tombstone_written": tombstone,
        "score_dependencies": list(depends),
    }
    return {"segment": segment, "score": 0.1, "perturbed_score": 0.1}


# a allowed; b refused (no tombstone); c scored against b, also in the pass.
PASS = [item("a"), item("b", tombstone=False), item("c", depends=["b", "kept"])]


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the requests a pipeline decided (a Decision built), in order."""
    seen: list[str] = []
    decide = Pipeline.decide

    def counting(self: Pipeline, request: Any, *args: Any, **kwargs: Any) -> Decision:
        seen.append(request.segment.id)
        return decide(self, request, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "decide", counting)
    return seen


class TestColumns:
    def test_the_columns_of_a_pass(self, built: list[str]) -> None:
        """allowed, evict_ids and codes answer in input order without building a decision."""
        result = Engine.default().authorize_pass(PASS)
        assert result.allowed == [True, False, False]
        assert result.evict_ids == ("a",)
        assert result.codes == (("authorized",), ("no_tombstone",), ("unscoreable",))
        assert result.segment_ids == ("a", "b", "c")
        assert len(result) == len(PASS)
        assert built == []

    def test_a_decision_is_built_once_when_read(self, built: list[str]) -> None:
        """result[i] builds that one decision, stamped <pass_id>-<i>, and keeps it."""
        result = Engine.default().authorize_pass(PASS)
        third = result[2]
        assert result[-1] is third
        assert built == ["c"]
        assert (third.decision_id, third.index) == (f"{result.pass_id}-2", 2)
        assert [a.to_dict() for a in third.actions] == [
            {"action": "resolve_dependencies_first", "ids": ["b"]}
        ]

    def test_iteration_and_slices_build_the_decisions_read(self, built: list[str]) -> None:
        """Iterating gives every decision in order; a slice builds only the ones it holds."""
        result = Engine.default().authorize_pass(PASS)
        assert [d.codes for d in result[1:]] == list(result.codes[1:])
        assert built == ["b", "c"]
        assert [d.outcome for d in result] == ["allow", "deny", "deny"]
        assert built == ["b", "c", "a"]

    def test_authorize_evictions_returns_every_decision(self) -> None:
        """authorize_evictions keeps its result: a tuple of the pass's decisions."""
        decisions = Engine.default().authorize_evictions(PASS)
        assert isinstance(decisions, tuple)
        assert [d.codes for d in decisions] == [
            ("authorized",),
            ("no_tombstone",),
            ("unscoreable",),
        ]


class ColumnHook:
    """A hook reading a pass's columns (on_pass), and decisions one by one otherwise."""

    def __init__(self) -> None:
        self.passes: list[PassResult] = []
        self.single: list[Decision] = []

    def __call__(self, decision: Decision, record: Mapping[str, Any]) -> None:  # noqa: ARG002
        self.single.append(decision)

    def on_pass(self, result: PassResult) -> None:
        self.passes.append(result)


class TestOnPass:
    def test_on_pass_gets_the_columns_and_the_record(self, built: list[str]) -> None:
        """A hook with on_pass is called once per pass, with the result and its record, and no
        decision is built for it."""
        hook = ColumnHook()
        result = Engine.default(on_decision=hook).authorize_pass(PASS)
        assert hook.passes == [result]
        assert hook.single == []
        assert result.record is not None
        assert result.record["segments"] == ["a", "b", "c"]
        assert built == []

    def test_a_plain_hook_still_gets_each_decision(self) -> None:
        """A hook without on_pass gets every decision of the pass, with the pass's record."""
        seen: list[tuple[Decision, Mapping[str, Any]]] = []
        result = Engine.default(on_decision=lambda d, r: seen.append((d, r))).authorize_pass(PASS)
        assert [d for d, _ in seen] == list(result)
        assert {id(r) for _, r in seen} == {id(result.record)}

    def test_a_raising_on_pass_changes_nothing(self, caplog: pytest.LogCaptureFixture) -> None:
        """An on_pass that raises is reported to the prunewarden logger; the pass stands and
        the other hooks still run."""

        class Broken(ColumnHook):
            def on_pass(self, result: PassResult) -> None:  # noqa: ARG002
                msg = "counter unavailable"
                raise RuntimeError(msg)

        after = ColumnHook()
        result = Engine.default(on_decision=[Broken(), after]).authorize_pass(PASS)
        assert result.allowed == [True, False, False]
        assert after.passes == [result]
        assert "on_decision hook" in caplog.text

    def test_a_general_pass_reaches_on_pass_too(self, make_policy: Any) -> None:
        """A pass down the general path (a guard in audit mode) is handed to on_pass as well,
        its decisions already built."""
        hook = ColumnHook()
        engine = Engine(make_policy(eviction={"mode": "audit"}), on_decision=hook)
        result = engine.authorize_pass(PASS)
        assert hook.passes == [result]
        assert result.record is not None
        assert result.record["record_version"] == 2
        assert result.codes[1] == ("no_tombstone",)


RULE = {
    "name": "no-drafts",
    "check": "eviction",
    "when": "segment.kind == 'draft'",
    "effect": "deny",
    "message": "drafts stay",
}
# A policy, or a pass, that the columns leave to the general path (a version 2 record).
GENERAL: dict[str, dict[str, Any]] = {
    "rules": {"params": {"unused": 1}, "rules": [RULE]},
    "calibration": {"scores": {"calibration": {"fixed": {"low": 0.05, "high": 0.9}}}},
    "audit-mode": {"eviction": {"mode": "audit"}},
    "off": {"eviction": {"mode": "off"}},
}


class TestWhichPath:
    @pytest.mark.parametrize("name", sorted(GENERAL))
    def test_an_unusual_policy_takes_the_general_path(
        self, name: str, make_policy: Any, tmp_path: Path
    ) -> None:
        """Rules, calibration, a guard in audit mode or off: each pass is written as version 2,
        decision by decision."""
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            result = Engine(make_policy(**GENERAL[name]), audit=audit).authorize_pass(PASS)
        record = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
        assert (record["kind"], record["record_version"]) == ("pass", 2)
        assert len(record["verdicts"]) == len(result) == len(PASS)

    def test_a_shadow_policy_takes_the_general_path(self, tmp_path: Path) -> None:
        """Beside a shadow policy the pass is decided decision by decision (each carries what
        the candidate decided)."""
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            engine = Engine.default(audit=audit, shadow=Engine.default().policy)
            result = engine.authorize_pass(PASS)
        record = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
        assert record["record_version"] == 2
        assert all(d.shadow is not None for d in result)

    def test_metadata_takes_the_general_path(self, tmp_path: Path) -> None:
        """A segment with metadata (which only rules read) sends its pass the general way."""
        items = [*PASS[:2], {**PASS[2], "segment": {**PASS[2]["segment"], "metadata": {"a": 1}}}]
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            result = Engine.default(audit=audit).authorize_pass(items)
        record = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
        assert record["record_version"] == 2
        assert result.codes == (("authorized",), ("no_tombstone",), ("unscoreable",))

    def test_the_default_policy_takes_the_columns(self, tmp_path: Path) -> None:
        """The bundled policy's passes are decided over columns (the control of the above)."""
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            Engine.default(audit=audit).authorize_pass(PASS)
        record = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
        assert record["record_version"] == 3


class FailingStream(io.StringIO):
    """A text stream that refuses every write (no space left)."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device", text[:0])


class TestUnwritten:
    def test_a_pass_that_cannot_be_logged_is_refused_whole(self) -> None:
        """A logger that fails refuses every decision of the pass (audit_unavailable), each
        built as the general path builds a refusal."""
        logger = structlog.wrap_logger(
            structlog.WriteLogger(FailingStream()),
            processors=[structlog.processors.JSONRenderer()],
        )
        result = Engine.default(logger=logger).authorize_pass(PASS)
        assert result.allowed == [False, False, False]
        assert result.codes == (("audit_unavailable",),) * 3
        first = result[0]
        assert (first.outcome, first.enforced, first.decision_id) == (
            "deny",
            True,
            f"{result.pass_id}-0",
        )
        assert first.reasons[0].detail == {"error": "OSError", "refused_pass": result.pass_id}

    def test_an_optional_log_that_fails_leaves_the_pass(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An audit log that is not required and fails is reported; the decisions stand."""
        with AuditLog(tmp_path / "audit.jsonl", required=False) as audit:
            engine = Engine.default(audit=audit)

            def refuse(*_: Any, **__: Any) -> None:
                msg = "disk gone"
                raise OSError(msg)

            monkeypatch.setattr("prunewarden.engine._passes.log_decision", refuse)
            result = engine.authorize_pass(PASS)
        assert result.allowed == [True, False, False]
        assert f"audit_write_failed: sink {audit.name}, pass {result.pass_id}" in caplog.text

    def test_the_record_a_pass_writes(self, tmp_path: Path) -> None:
        """The v3 record names the dependencies of the unscoreable segment, by index."""
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            Engine.default(audit=audit).authorize_pass(PASS)
        record = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
        assert (record["record_version"], record["allowed"]) == (3, "100")
        assert record["dependencies"] == {"2": ["b"]}


class FailsOnce(io.StringIO):
    """A text stream whose first write fails (no space left), and whose later writes land."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def write(self, text: str) -> int:
        if not self.failed:
            self.failed = True
            raise OSError(28, "No space left on device")
        return super().write(text)


class TestRefusalsAreLogged:
    def test_the_refusals_of_a_pass_that_could_not_be_logged_are_logged(self) -> None:
        """A pass whose record could not be written is refused whole, and the record of those
        refusals is written to the audit log when it takes writes again: its readers find
        audit_unavailable for each decision."""
        stream = FailsOnce()
        result = Engine.default(audit=AuditLog(stream)).authorize_pass(PASS)
        assert result.codes == (("audit_unavailable",),) * 3
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        (record,) = [r for r in records if r["kind"] == "pass"]
        assert (record["record_version"], record["pass_id"]) == (3, result.pass_id)
        assert [[r["code"] for r in row["reasons"]] for row in decision_rows(record)] == [
            ["audit_unavailable"]
        ] * 3


class TestWhatTheRecordSaysOfItsMaking:
    def test_a_pass_over_columns_records_its_duration_and_trace(self) -> None:
        """The version 3 record of a pass says how long deciding took and names the caller's
        trace and span, as every record does."""
        trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        stream = io.StringIO()
        engine = Engine.default(audit=AuditLog(stream), trace_context=lambda: (trace, span))
        engine.authorize_pass(PASS)
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        (record,) = [r for r in records if r["kind"] == "pass"]
        assert record["record_version"] == 3
        assert isinstance(record["duration_ns"], int)
        assert record["duration_ns"] > 0
        assert (record["trace_id"], record["span_id"]) == (trace, span)
