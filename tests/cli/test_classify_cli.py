"""``prunewarden classify FILE``: what each segment of a window becomes under the policy's
classifier, and why; a malformed window is one located line and exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

from prunewarden.cli._main import run
from prunewarden.errors import ExitCode

WINDOW = {
    "check": "transition",
    "before": [
        {"id": "m0", "role": "system", "text": "You are careful."},
        {"id": "m1", "role": "user", "text": "All timestamps must be UTC; never emit local time."},
        {"id": "m2", "role": "user", "text": "A sprint means two calendar weeks."},
        {"id": "m3", "role": "assistant", "content": [{"type": "text", "text": "You must not."}]},
        {"id": "m4", "kind": "summary", "text": "never"},
        {"id": "m5", "role": "tool", "tool": "read_notes", "text": "keep the cache cold"},
    ],
    "after": [{"id": "m0", "kind": "system", "text": "You are careful."}],
}
POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: notes, version: 1.0.0}
spec:
  classify:
    rules:
      - {match: {role: tool, tool: read_notes}, kind: constraint}
"""


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


class TestClassify:
    def test_each_segment_and_why(self, tmp_path: Path) -> None:
        """Under the default policy: the defaults name the constraint and the definition; the
        others keep their role's kind; a segment with its own kind is left alone."""
        window = tmp_path / "window.json"
        window.write_text(json.dumps(WINDOW), encoding="utf-8")
        code, out, err = _run("classify", str(window))
        assert (code, err) == (ExitCode.OK, "")
        assert out.splitlines() == [
            "m0: system -> system (no rule matched: its role's kind)",
            (
                "m1: user -> constraint (default constraint: an instruction with never, always, "
                "must, do not)"
            ),
            (
                'm2: user -> definition (default definition: "X means / refers to / is defined as '
                '...")'
            ),
            "m3: assistant -> assistant (no rule matched: its role's kind)",
            "m4: summary (arrived with its kind; not classified)",
            "m5: tool -> tool (no rule matched: its role's kind)",
            "m0: system -> system (no rule matched: its role's kind)",
        ]

    def test_the_policys_rules_and_json(self, tmp_path: Path) -> None:
        """--policy: the policy's rule names the tool's results; --format json lists them."""
        window = tmp_path / "window.json"
        window.write_text(json.dumps(WINDOW["before"]), encoding="utf-8")
        policy = tmp_path / "notes.yaml"
        policy.write_text(POLICY, encoding="utf-8")
        code, out, _ = _run("classify", str(window), "--policy", str(policy), "--format", "json")
        assert code == ExitCode.OK
        rows = json.loads(out)
        assert rows[5] == {
            "id": "m5",
            "role": "tool",
            "kind": "constraint",
            "rule": "spec.classify.rules[0]",
        }

    def test_a_bad_segment_is_one_located_line(self, tmp_path: Path) -> None:
        window = tmp_path / "bad.json"
        window.write_text('{"segments": [\n  {"id": "a", "role": "bot", "text": "x"}\n]}')
        code, out, err = _run("classify", str(window))
        assert (code, out) == (ExitCode.USAGE, "")
        assert err == (
            f"{window}:2:23: $.segments[0].role: 'bot' is not a role (system, user, assistant, "
            "tool)\n"
        )
