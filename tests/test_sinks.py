"""Where decisions go: nowhere until the caller chooses a sink; hooks see every decision."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import structlog
from prunewarden import AuditLog, Decision, Engine, ReloadingEngine

SEGMENT = {"id": "t3", "kind": "turn", "tombstone_written": True}
EVICTION = {"check": "eviction", "segment": SEGMENT, "score": 0.1, "perturbed_score": 0.1}

# 1,000 decisions through every path an agent uses, with no sink chosen. A hook counts them and
# the exit code says whether the count is right: nothing may be printed, not even that.
THOUSAND_DECISIONS = """
import sys
import prunewarden

counted = []
e = prunewarden.Engine.default()
hooked = prunewarden.Engine.default(on_decision=lambda d, r: counted.append(d))
session = e.session("s")
segment = {"id": "t3", "kind": "turn", "tombstone_written": True}
document = {"check": "eviction", "segment": segment, "score": 0.1, "perturbed_score": 0.1}
for i in range(200):
    e.evaluate(document)
    e.authorize_eviction(segment, 0.1, 0.1, session_id="s")
    session.observe_cycle({"a": 0.5, "b": 0.1 + i / 1000, "task": 0.9}, ["task"])
    session.authorize(segment, 0.1, 0.1)
    hooked.evaluate(document)
sys.exit(0 if len(counted) == 200 else 3)
"""


def capture(logger: Any) -> list[dict[str, Any]]:
    return [call.kwargs for call in logger.calls]


class TestSilentByDefault:
    @pytest.mark.spawns
    def test_a_thousand_decisions_print_nothing(self) -> None:
        """Import, an engine, a session and 1,000 decisions write nothing to stdout or
        stderr when no sink was chosen."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        env.pop("PRUNEWARDEN_AUDIT_LOG", None)
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(THOUSAND_DECISIONS)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

    def test_diagnostics_go_to_the_prunewarden_logger_with_a_null_handler(self) -> None:
        """logging.getLogger("prunewarden") has a NullHandler: unconfigured logging prints
        nothing (the last-resort handler is not used)."""
        handlers = logging.getLogger("prunewarden").handlers
        assert any(isinstance(h, logging.NullHandler) for h in handlers)

    def test_a_failed_reload_without_a_sink_is_silent(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
    ) -> None:
        """A policy that fails to reload is reported to the diagnostics logger only."""
        path = tmp_path / "p.yaml"
        path.write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: p, version: 1.0.0}\n"
            "spec: {}\n",
            encoding="utf-8",
        )
        with ReloadingEngine(path, interval=0) as engine, caplog.at_level("WARNING"):
            path.write_text("kind: [", encoding="utf-8")
            assert not engine.reload().changed
        assert capsys.readouterr() == ("", "")
        assert [r.getMessage().split(":")[0] for r in caplog.records] == ["policy_reload_failed"]


class TestDecisionHooks:
    def test_hooks_see_every_decision_and_its_record(self) -> None:
        """Several hooks, in order, each get every decision with the record the sink got."""
        stream = io.StringIO()
        seen: list[tuple[str, Decision, dict[str, Any]]] = []
        engine = Engine.default(
            audit=AuditLog(stream),
            on_decision=[
                lambda d, r: seen.append(("first", d, dict(r))),
                lambda d, r: seen.append(("second", d, dict(r))),
            ],
        )
        decision = engine.evaluate(EVICTION, session_id="s")
        (logged,) = [
            r for r in map(json.loads, stream.getvalue().splitlines()) if r["kind"] == "decision"
        ]
        assert [name for name, _, _ in seen] == ["first", "second"]
        for _, got, record in seen:
            assert got is decision
            assert record["decision_id"] == logged["decision_id"] == decision.decision_id
            assert record["policy"]["digest"] == logged["policy"]["digest"]
            assert (record["session_id"], record["from_session"]) == ("s", False)

    def test_hooks_without_any_sink(self) -> None:
        """With no audit log and no logger, the hook is the sink."""
        seen: list[str] = []
        engine = Engine.default(on_decision=lambda _d, r: seen.append(r["outcome"]))
        engine.evaluate(EVICTION)
        assert seen == ["allow"]

    def test_a_raising_hook_changes_nothing(self, caplog: pytest.LogCaptureFixture) -> None:
        """A hook that raises is reported to logging "prunewarden"; the decision stands and
        the other hooks still run."""
        seen: list[str] = []

        def broken(decision: Decision, record: Any) -> None:
            msg = "counter unavailable"
            raise RuntimeError(msg)

        engine = Engine.default(on_decision=[broken, lambda d, _r: seen.append(d.outcome)])
        with caplog.at_level("ERROR", logger="prunewarden"):
            decision = engine.evaluate(EVICTION)
        assert (decision.outcome, decision.codes) == ("allow", ("authorized",))
        assert seen == ["allow"]
        (report,) = caplog.records
        assert report.exc_info is not None
        assert report.exc_info[0] is RuntimeError

    def test_a_refusal_for_an_unwritable_log_reaches_the_hooks(self) -> None:
        """A decision refused because it could not be logged is still handed to the hooks."""
        stream = io.StringIO()
        seen: list[tuple[str, ...]] = []
        engine = Engine.default(
            audit=AuditLog(stream), on_decision=lambda d, _r: seen.append(d.codes)
        )
        stream.close()
        assert engine.evaluate(EVICTION).codes == ("audit_unavailable",)
        assert seen == [("audit_unavailable",)]

    def test_a_structlog_logger_passed_in_is_a_sink(self) -> None:
        """logger=... receives the same fields as the hook's record."""
        logger = structlog.testing.CapturingLogger()
        records: list[dict[str, Any]] = []
        engine = Engine.default(logger=logger, on_decision=lambda _d, r: records.append(dict(r)))
        engine.evaluate(EVICTION)
        (logged,) = capture(logger)
        assert logged["decision_id"] == records[0]["decision_id"]

    def test_hooks_must_be_callable(self) -> None:
        """on_decision takes a callable or an iterable of callables."""
        with pytest.raises(TypeError, match="on_decision"):
            Engine.default(on_decision=["not callable"])
