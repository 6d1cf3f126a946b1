"""The compaction preview: per pinned parent, the facts a summary kept, restated and lost, side
by side, from ``prunewarden hook claude-code --preview`` on a transcript and from ``prunewarden
explain`` on a transition document; in text and JSON, with nothing recorded and no text in the
decision."""

from __future__ import annotations

import io
import json
from pathlib import Path

from _support.coding_agents import rollout_line, write_rollout, write_transcript
from prunewarden import load_builtin_policy
from prunewarden.cli._main import run
from prunewarden.errors import ExitCode
from prunewarden.fidelity import fact_ledger
from prunewarden.integrations.compaction_preview import parent_previews

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "examples" / "compaction" / "session.jsonl"
FIDELITY = ROOT / "examples" / "compaction" / "fidelity.yaml"


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return run(list(argv), out, io.StringIO()), out.getvalue()


class TestLedger:
    def test_each_fact_is_kept_restated_or_lost(self) -> None:
        """The same fact is kept; 0.5 s for 500 ms is restated; a negation the summary turned
        into an affirmation is lost."""
        ledger = fact_ledger(
            "Keep the timeout at 500 ms in src/app.py; never emit local time.",
            "The timeout stays at 0.5 s in src/app.py; emit local time.",
        )
        assert ledger["path"] == {"kept": ["src/app.py"], "restated": [], "lost": []}
        assert ledger["number"] == {"kept": [], "restated": ["500 ms"], "lost": []}
        assert ledger["negation"]["lost"] == ["emit local tim"]

    def test_a_removed_parent_loses_every_fact(self) -> None:
        before = [{"id": "m1", "kind": "constraint", "text": "Port 8080 only."}]
        (preview,) = parent_previews(before, [], load_builtin_policy())
        assert preview["children"] == []
        assert preview["facts"]["number"]["lost"] == ["8080"]

    def test_a_parent_kept_verbatim_is_not_previewed(self) -> None:
        window = [{"id": "m1", "kind": "constraint", "text": "Port 8080 only."}]
        assert parent_previews(window, window, load_builtin_policy()) == []


class TestHookPreview:
    def test_the_text_shows_each_pinned_parent_side_by_side(self, tmp_path: Path) -> None:
        audit = tmp_path / "audit.jsonl"
        code, out = cli(
            "hook",
            "claude-code",
            "--preview",
            str(SESSION),
            "--policy",
            str(FIDELITY),
            "--audit-log",
            str(audit),
        )
        assert code == ExitCode.REFUSED
        lines = out.splitlines()
        assert lines[0].endswith("the last compaction: deny (negation_lost, fact_lost)")
        assert "  fact      kept         restated  lost" in lines
        assert "  number    -            500 ms    -" in lines
        assert "  path        -         -         src/report/export.py" in lines
        assert not audit.exists()  # a preview records nothing

    def test_the_json_holds_the_decision_and_the_parents_apart(self) -> None:
        code, out = cli(
            "hook",
            "claude-code",
            "--preview",
            str(SESSION),
            "--policy",
            str(FIDELITY),
            "--format",
            "json",
        )
        assert code == ExitCode.REFUSED
        document = json.loads(out)
        assert [p["parent"] for p in document["parents"]] == ["u0", "u1"]
        assert document["parents"][1]["facts"]["negation"]["lost"] == ["emit local tim"]
        decision = json.dumps(document["decision"])
        assert "never emit local time" not in decision  # the decision carries no text


class TestPreviewOfOtherTranscripts:
    def test_a_codex_rollout_is_previewed_the_same_way(self, tmp_path: Path) -> None:
        rollout = tmp_path / "r.jsonl"
        write_rollout(rollout)
        lossy = (
            "Fixing the CSV exporter; timestamps are UTC, emit local time. Never commit to main."
        )
        with rollout.open("a", encoding="utf-8") as stream:
            stream.write(rollout_line("compacted", {"message": lossy}) + "\n")
        code, out = cli("hook", "codex", "--preview", str(rollout), "--policy", str(FIDELITY))
        assert code == ExitCode.REFUSED
        assert "  negation    -         -         emit local tim" in out.splitlines()

    def test_a_transcript_without_a_compaction_or_a_file_is_a_located_error(
        self, tmp_path: Path
    ) -> None:
        plain = tmp_path / "plain.jsonl"
        write_transcript(plain)
        err = io.StringIO()
        code = run(["hook", "claude-code", "--preview", str(plain)], io.StringIO(), err)
        assert code == ExitCode.USAGE
        assert err.getvalue() == f"{plain}: $: the transcript holds no compaction\n"
        err = io.StringIO()
        missing = str(tmp_path / "absent.jsonl")
        code = run(["hook", "claude-code", "--preview", missing], io.StringIO(), err)
        assert code == ExitCode.USAGE
        assert err.getvalue() == f"{missing}: $: cannot read: No such file or directory\n"


class TestExplainPreview:
    def test_explain_on_a_transition_shows_the_parents(self) -> None:
        document = ROOT / "examples" / "inputs" / "transition-trim-dropped-task.json"
        code, out = cli("explain", str(document), "--format", "text", "--audit-log", "/dev/null")
        assert code == ExitCode.REFUSED
        section = out.split("Pinned parents: the facts the edit kept, restated and lost\n")[1]
        assert section.splitlines()[:2] == [
            "m1 (constraint) -> nothing (removed)",
            "  'All timestamps must be UTC.'",
        ]

    def test_explain_preview_json_wraps_the_decision(self) -> None:
        document = ROOT / "examples" / "inputs" / "transition-trim-dropped-task.json"
        code, out = cli("explain", str(document), "--preview", "--audit-log", "/dev/null")
        assert code == ExitCode.REFUSED
        shown = json.loads(out)
        assert shown["decision"]["check"] == "transition"
        assert shown["parents"][0]["facts"]["identifier"]["lost"] == ["utc"]
        _, plain = cli("explain", str(document), "--audit-log", "/dev/null")
        assert "parents" not in json.loads(plain)  # without --preview: the decision alone
