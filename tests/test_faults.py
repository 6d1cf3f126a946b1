"""Faults injected on the decision path: a guard that raises, a log sink that fails, a policy file
replaced while it is read. Decisions refuse with the right reason; nothing logged is lost."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Self

import pytest
import structlog
from prunewarden import AuditLog, Engine, PolicyError, load_policy, parse_policy
from prunewarden._files import open_regular
from prunewarden.cli._main import run
from prunewarden.guards import GUARDS, Guard
from prunewarden.policy import _build as policy_build
from structlog.testing import capture_logs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "inputs"


def eviction(segment_id: str = "s1") -> dict[str, Any]:
    """An eviction document the default policy allows."""
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": "turn", "tombstone_written": True},
        "score": 0.1,
        "perturbed_score": 0.12,
    }


def item(segment_id: str) -> dict[str, Any]:
    return {k: v for k, v in eviction(segment_id).items() if k != "check"}


class FailingStream(io.StringIO):
    """A text stream that raises OSError (no space left) on write while ``failing`` is set."""

    failing = False

    def write(self, text: str) -> int:
        if self.failing:
            raise OSError(28, "No space left on device")
        return super().write(text)


def json_logger(stream: IO[str]) -> Any:
    """A structlog logger writing one JSON object per line, as an application configures it."""
    return structlog.wrap_logger(
        structlog.WriteLogger(stream),  # type: ignore[arg-type]  # any text stream will do
        processors=[structlog.processors.JSONRenderer(sort_keys=True)],
    )


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    """Every record of the stream; each line must be one whole JSON object."""
    return [json.loads(line) for line in stream.getvalue().splitlines()]


class TestGuardFaults:
    @pytest.fixture
    def raising_eviction(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The eviction guard raises for segment 'bad' and decides every other one."""
        original = GUARDS["eviction"]

        def evaluate(settings: Any, request: Any) -> Any:
            if request.segment.id == "bad":
                msg = "scorer state corrupted"
                raise RuntimeError(msg)
            return original.evaluate(settings, request)

        monkeypatch.setitem(GUARDS, "eviction", Guard(evaluate, "deny", original.when_off))

    @pytest.mark.usefixtures("raising_eviction")
    def test_a_guard_that_raises_refuses(self) -> None:
        """The decision is an enforced deny with internal_error, logged like any other."""
        engine = Engine.default(logger=structlog.get_logger())
        with capture_logs() as logs:
            decision = engine.evaluate(eviction("bad"))
        assert (decision.outcome, decision.enforced, decision.codes) == (
            "deny",
            True,
            ("internal_error",),
        )
        assert decision.reasons[0].detail == {"error": "RuntimeError"}
        assert [r["decision_id"] for r in logs] == [decision.decision_id]
        assert logs[0]["reasons"][0]["code"] == "internal_error"

    @pytest.mark.usefixtures("raising_eviction")
    def test_one_raising_segment_in_a_pass(self) -> None:
        """In a pass, only the segment whose guard raised is refused; every one is in the
        pass's record."""
        engine = Engine.default(logger=structlog.get_logger())
        with capture_logs() as logs:
            decisions = engine.authorize_evictions([item("a"), item("bad"), item("c")])
        assert [d.codes for d in decisions] == [
            ("authorized",),
            ("internal_error",),
            ("authorized",),
        ]
        (record,) = logs
        assert [tuple(v["codes"]) for v in record["verdicts"]] == [d.codes for d in decisions]


class TestSinkFaults:
    def test_failing_logger_refuses_and_keeps_what_was_logged(self) -> None:
        """Decisions that cannot be logged refuse with audit_unavailable; records written before
        the failure stay whole, and logging resumes when the sink does."""
        stream = FailingStream()
        engine = Engine.default(logger=json_logger(stream))
        before = [engine.evaluate(eviction(f"s{i}")) for i in range(3)]
        stream.failing = True
        during = engine.evaluate(eviction("s3"))
        stream.failing = False
        after = engine.evaluate(eviction("s4"))

        assert [d.codes for d in before] == [("authorized",)] * 3
        assert (during.outcome, during.codes) == ("deny", ("audit_unavailable",))
        assert during.reasons[0].detail["error"] == "OSError"
        assert after.codes == ("authorized",)
        logged = [r["decision_id"] for r in lines(stream)]
        assert logged == [d.decision_id for d in (*before, after)]

    def test_failing_audit_log_refuses_the_whole_pass(self) -> None:
        """An audit log that fails when a pass is written: every decision of the pass is
        refused (the pass is one record), what was written before stays, and the log resumes
        with the next pass."""
        stream = FailingStream()
        engine = Engine.default(audit=AuditLog(stream, fsync="never"))
        engine.evaluate(eviction("warm-up"))  # the policy and the first decision are logged
        written = len(lines(stream))
        stream.failing = True
        decisions = engine.authorize_evictions([item(f"p{i}") for i in range(5)])
        stream.failing = False
        after = engine.authorize_evictions([item(f"q{i}") for i in range(2)])
        assert [d.codes for d in decisions] == [("audit_unavailable",)] * 5
        assert {d.reasons[0].detail["refused_pass"] for d in decisions} == {decisions[0].pass_id}
        assert [d.codes for d in after] == [("authorized",)] * 2
        records = lines(stream)
        assert [r["kind"] for r in records[written:]] == ["pass"]
        assert records[written]["pass_id"] == after[0].pass_id

    def test_the_sink_says_why_its_last_write_failed(self) -> None:
        """``AuditLog.failure`` names the failed write until a write succeeds again."""
        stream = FailingStream()
        audit = AuditLog(stream, fsync="never")
        engine = Engine.default(audit=audit)
        assert audit.failure is None
        stream.failing = True
        refused = engine.evaluate(eviction("while-full"))
        failure = "cannot write audit log -: No space left on device"
        assert audit.failure == failure
        assert failure in refused.reasons[0].message
        stream.failing = False
        assert engine.evaluate(eviction("after")).codes == ("authorized",)
        assert audit.failure is None

    def test_full_disk_through_the_command_line(self) -> None:
        """An audit log on a full device: the decision is refused (exit 1), not lost or crashed."""
        out, err = io.StringIO(), io.StringIO()
        code = run(
            ["evaluate", "--audit-log", "/dev/full", str(EXAMPLES / "eviction-healthy.json")],
            out,
            err,
        )
        decision = json.loads(out.getvalue())
        assert (code, decision["outcome"]) == (1, "deny")
        assert [r["code"] for r in decision["reasons"]] == ["audit_unavailable"]


class _ReplacedWhileRead:
    """A file object over ``path`` that runs ``replace`` after its first 64 bytes are read."""

    def __init__(self, path: Path, replace: Callable[[], object]) -> None:
        self.raw = open(path, "rb", buffering=0)  # noqa: PTH123, SIM115 - unbuffered, on purpose
        self.replace = replace

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.close()

    def fileno(self) -> int:
        return self.raw.fileno()

    def read(self, size: int = -1) -> bytes:
        head = self.raw.read(64) or b""
        self.replace()
        rest = self.raw.readall() if size < 0 else self.raw.read(max(size - len(head), 0))
        return head + (rest or b"")


OLD = (ROOT / "examples" / "policies" / "long-horizon.yaml").read_text(encoding="utf-8")
NEW = (ROOT / "policies" / "default.yaml").read_text(encoding="utf-8")


class TestPolicyReplacedMidRead:
    @pytest.fixture
    def policy_path(self, tmp_path: Path) -> Path:
        path = tmp_path / "policy.yaml"
        path.write_text(OLD, encoding="utf-8")
        return path

    def _race(
        self, monkeypatch: pytest.MonkeyPatch, path: Path, replace: Callable[[], object]
    ) -> None:
        real_open = open_regular

        def racing_open(name: str | os.PathLike[str]) -> Any:
            if Path(name) == path:
                return _ReplacedWhileRead(path, replace)
            return real_open(name)

        monkeypatch.setattr(policy_build, "open_regular", racing_open)

    def test_rewritten_in_place_is_refused(
        self, monkeypatch: pytest.MonkeyPatch, policy_path: Path
    ) -> None:
        """A policy rewritten in place while it is read is refused, not loaded half old, half
        new."""
        self._race(monkeypatch, policy_path, lambda: policy_path.write_text(NEW, encoding="utf-8"))
        with pytest.raises(PolicyError) as info:
            load_policy(policy_path)
        (problem,) = info.value.problems
        assert problem.message.startswith("cannot read: file changed while it was being read")

    def test_replaced_by_rename_loads_the_old_file_whole(
        self, monkeypatch: pytest.MonkeyPatch, policy_path: Path
    ) -> None:
        """Renaming a new file over the policy while it is read leaves the read on the old file,
        which loads whole."""

        def rename() -> None:
            new = policy_path.with_name("new.yaml")
            new.write_text(NEW, encoding="utf-8")
            new.replace(policy_path)

        self._race(monkeypatch, policy_path, rename)
        assert load_policy(policy_path).digest == parse_policy(OLD).digest
        monkeypatch.undo()
        assert load_policy(policy_path).digest == parse_policy(NEW).digest

    def test_command_line_refuses_and_decides_nothing(
        self, monkeypatch: pytest.MonkeyPatch, policy_path: Path, tmp_path: Path
    ) -> None:
        """evaluate --policy on a policy rewritten while read exits 3 and logs no decision."""
        self._race(monkeypatch, policy_path, lambda: policy_path.write_text(NEW, encoding="utf-8"))
        log = tmp_path / "audit.jsonl"
        out, err = io.StringIO(), io.StringIO()
        argv = ["evaluate", "--policy", str(policy_path), "--audit-log", str(log)]
        code = run([*argv, str(EXAMPLES / "eviction-healthy.json")], out, err)
        assert (code, out.getvalue()) == (3, "")
        assert "file changed while it was being read" in err.getvalue()
        assert not log.exists() or '"kind":"decision"' not in log.read_text(encoding="utf-8")

    def test_an_engine_keeps_the_policy_it_was_built_with(self, policy_path: Path) -> None:
        """Replacing the file does not change an engine already running on it."""
        engine = Engine.from_file(policy_path, logger=structlog.get_logger())
        policy_path.write_text(NEW, encoding="utf-8")
        with capture_logs() as logs:
            decision = engine.evaluate(eviction())
        assert decision.policy.digest == parse_policy(OLD).digest
        assert logs[0]["policy"]["digest"] == parse_policy(OLD).digest
