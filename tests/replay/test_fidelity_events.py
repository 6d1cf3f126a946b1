"""Rewrite fidelity where transitions are replayed and evaluated: trace lines and the
``prunewarden evaluate`` command."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from prunewarden import Engine, parse_policy
from prunewarden.cli._main import run
from prunewarden.decision import Decision
from prunewarden.replay._events import TraceEvent, TraceHeader
from prunewarden.replay._run import Result, SilentLogger, run_trace

ROOT = Path(__file__).resolve().parents[2]
POLICY = (ROOT / "policies" / "default.yaml").read_text(encoding="utf-8").replace(
    "name: default", "name: fidelity"
) + "  fidelity: {mode: enforce}\n"
UTC = {
    "id": "c1",
    "kind": "constraint",
    "text": "All timestamps must be UTC; never emit local time.",
}
SUMMARY = {
    "id": "s1",
    "kind": "summary",
    "text": "UTC timestamps; emit local time.",
    "derived_from": ["c1"],
}
DOCUMENT = {"check": "transition", "before": [UTC], "after": [SUMMARY], "tombstones": ["c1"]}


class TestReplay:
    def test_a_replayed_summary_is_checked_for_fidelity(self, tmp_path: Path) -> None:
        """A trace's transition line that loses the seed's negation is refused on replay."""
        trace = tmp_path / "t.jsonl"
        lines = [{"type": "session", "trace_version": 1, "session_id": "agent-9"}]
        lines.append({"type": "transition", **{k: v for k, v in DOCUMENT.items() if k != "check"}})
        trace.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
        found: list[Result] = []

        def keep(header: TraceHeader, event: TraceEvent, results: list[Result]) -> None:
            del header, event
            found.append(results[0])

        engine = Engine(parse_policy(POLICY, "fidelity.yaml"), logger=SilentLogger())
        run_trace([engine], str(trace), keep)
        decided = [r.codes for r in found if isinstance(r, Decision)]
        assert decided == [("negation_lost",)]


class TestEvaluate:
    def test_evaluate_refuses_with_exit_one(self, tmp_path: Path) -> None:
        """prunewarden evaluate: the lossy summary is refused (exit 1); the decision names ids
        and kinds, and the audit record (on stderr) holds no text of either segment."""
        policy, document = tmp_path / "policy.yaml", tmp_path / "summary.json"
        policy.write_text(POLICY, encoding="utf-8")
        document.write_text(json.dumps(DOCUMENT), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        code = run(["evaluate", "--policy", str(policy), str(document)], out, err)
        decision: dict[str, Any] = json.loads(out.getvalue())
        assert code == 1
        assert "local time" not in err.getvalue()
        assert '"negation_lost"' in err.getvalue()
        assert decision["reasons"][0]["detail"] == {
            "parent": "c1",
            "child": "s1",
            "lost": ["negation"],
        }
