"""``--embedder minilm``: evaluate and explain attach the bundled MiniLM embedder, so a policy
whose fidelity check uses meaning decides instead of refusing every summary; without the option
such a policy fails closed, and a missing extra is a usage error before anything is decided."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from prunewarden.cli._common import NEEDS_EMBED
from prunewarden.cli._main import run
from prunewarden.errors import ExitCode

TASK = (
    "Fix the CSV exporter in src/report/export.py. All timestamps must be UTC; never emit "
    "local time. Keep the diff small and explain each change in the pull request."
)
# Every fact kept, the last instruction dropped: only the meaning method sees it.
DROPPED = (
    "Fix the CSV exporter in src/report/export.py. Timestamps are UTC; local time is never emitted."
)
POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: meaning, version: 1.0.0}
spec:
  fidelity: {method: both, embedding_floor: 0.6}
"""


def cli(*argv: str) -> tuple[int, dict[str, Any] | None, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    text = out.getvalue()
    return code, json.loads(text) if text.startswith("{") else None, err.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    """A policy with method both, and a transition folding the task into DROPPED."""
    policy = tmp_path / "meaning.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    task = {"id": "task", "kind": "task", "text": TASK}
    summary = {"id": "sum", "kind": "summary", "text": DROPPED, "derived_from": ["task"]}
    document = {
        "check": "transition",
        "before": [task],
        "after": [summary],
        "tombstones": ["task"],
        "canaries": ["task"],
    }
    transition = tmp_path / "transition.json"
    transition.write_text(json.dumps(document), encoding="utf-8")
    return str(policy), str(transition)


class TestEmbedderOption:
    def test_evaluate_with_minilm_refuses_the_drift(self, files: tuple[str, str]) -> None:
        """evaluate --embedder minilm: meaning_drift naming the task and the summary."""
        policy, transition = files
        code, decision, _ = cli("evaluate", "--policy", policy, "--embedder", "minilm", transition)
        assert decision is not None
        assert (code, decision["outcome"]) == (ExitCode.REFUSED, "deny")
        assert [(r["code"], r["detail"]) for r in decision["reasons"]] == [
            ("meaning_drift", {"parent": "task", "child": "sum", "lost": ["meaning"]})
        ]

    def test_explain_with_minilm_names_the_drift(self, files: tuple[str, str]) -> None:
        """explain --embedder minilm decides with the embedder too."""
        policy, transition = files
        code, decision, _ = cli("explain", "--policy", policy, "--embedder", "minilm", transition)
        assert decision is not None
        assert code == ExitCode.REFUSED
        assert [r["code"] for r in decision["reasons"]] == ["meaning_drift"]

    def test_without_an_embedder_the_check_fails_closed(self, files: tuple[str, str]) -> None:
        """evaluate without --embedder: the summary is refused with internal_error."""
        policy, transition = files
        code, decision, _ = cli("evaluate", "--policy", policy, transition)
        assert decision is not None
        assert (code, [r["code"] for r in decision["reasons"]]) == (
            ExitCode.REFUSED,
            ["internal_error"],
        )

    def test_a_missing_extra_is_a_usage_error(
        self, files: tuple[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """Without the embed extra: exit 2, one line saying what to install, nothing logged."""
        monkeypatch.setitem(sys.modules, "prunewarden.scoring.embed", None)
        policy, transition = files
        log = tmp_path / "audit.jsonl"
        code, decision, err = cli(
            "evaluate", "--policy", policy, "--embedder", "minilm", "--audit-log", str(log),
            transition,
        )  # fmt: skip
        assert (code, decision) == (ExitCode.USAGE, None)
        assert err.splitlines() == [f"prunewarden: --embedder minilm {NEEDS_EMBED}"]
        assert "pip install 'prunewarden[embed]'" in err
        assert not log.exists()

    @pytest.mark.parametrize("command", ["serve", "mcp"])
    def test_a_server_without_the_extra_does_not_start(
        self,
        command: str,
        files: tuple[str, str],
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
    ) -> None:
        """serve and mcp with --embedder minilm and no embed extra: exit 2, no log opened."""
        monkeypatch.setitem(sys.modules, "prunewarden.scoring.embed", None)
        policy, _ = files
        log = tmp_path / "audit.jsonl"
        code, _, err = cli(
            command, "--policy", policy, "--embedder", "minilm", "--audit-log", str(log)
        )
        assert code == ExitCode.USAGE
        assert err.splitlines() == [f"prunewarden: --embedder minilm {NEEDS_EMBED}"]
        assert not log.exists()

    @pytest.mark.parametrize("command", ["evaluate", "explain", "serve", "mcp"])
    def test_the_commands_deciding_transitions_take_it(self, command: str) -> None:
        """--help of each command that decides transitions lists --embedder {minilm}."""
        out = io.StringIO()
        assert run([command, "--help"], out, io.StringIO()) == 0
        assert "--embedder {minilm}" in out.getvalue()

    def test_an_unknown_embedder_is_a_usage_error(self, files: tuple[str, str]) -> None:
        """--embedder other: exit 2 naming the choices."""
        policy, transition = files
        code, _, err = cli("evaluate", "--policy", policy, "--embedder", "other", transition)
        assert code == ExitCode.USAGE
        assert "invalid choice: 'other' (choose from 'minilm')" in err
