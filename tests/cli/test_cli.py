"""The command line, run in-process through ``run(argv, stdout, stderr)``."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
from prunewarden.cli._common import EXIT_CODE_MEANINGS, exit_codes_epilog
from prunewarden.cli._main import COMMANDS, _parser, run
from prunewarden.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "inputs"


def cli(*argv: str, stdin: str | None = None, monkeypatch: Any = None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


class TestValidate:
    def test_valid_policies_exit_zero(self) -> None:
        """Every bundled and example policy validates."""
        files = [
            str(p)
            for p in [
                ROOT / "policies" / "default.yaml",
                *sorted((ROOT / "examples" / "policies").glob("*.yaml")),
            ]
        ]
        code, out, err = cli("validate", *files)
        assert (code, err) == (0, "")
        assert out.count(": valid (") == len(files)

    def test_invalid_policy_exits_three_with_one_line_per_problem(self, tmp_path: Path) -> None:
        """Problems go to stderr, one located line each; valid files still report."""
        bad = tmp_path / "bad.yaml"
        bad.write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: x, version: "
            "1.0.0}\nspec:\n  collapse: {spread_floor: 2, mode: maybe}\n"
        )
        code, out, err = cli("validate", str(bad), str(ROOT / "policies" / "default.yaml"))
        assert code == 3
        lines = err.splitlines()
        assert len(lines) == 2
        assert lines[0].startswith(f"{bad}:5:")
        assert "$.spec.collapse.spread_floor: 2 is greater than the maximum of 1" in lines[0]
        assert "default.yaml: valid" in out

    def test_missing_file_exits_three(self, tmp_path: Path) -> None:
        """A policy that cannot be read is an invalid policy."""
        code, _, err = cli("validate", str(tmp_path / "nope.yaml"))
        assert code == 3
        assert "cannot read" in err


class TestEvaluate:
    @pytest.mark.parametrize(
        ("name", "code", "outcome"),
        [
            ("collapse-seed-narrowing.json", 1, "halt"),
            ("collapse-healthy.json", 0, "allow"),
            ("eviction-utc-constraint.json", 1, "deny"),
            ("eviction-healthy.json", 0, "allow"),
            ("staleness-summary-orphans.json", 1, "deny"),
            ("staleness-healthy.json", 0, "allow"),
        ],
    )
    def test_examples_decide_with_documented_exit_codes(
        self, name: str, code: int, outcome: str, tmp_path: Path
    ) -> None:
        """Allow exits 0, an enforced refusal exits 1; the decision JSON is on stdout."""
        log = tmp_path / "audit.jsonl"
        got, out, err = cli("evaluate", "--audit-log", str(log), str(EXAMPLES / name))
        assert (got, err) == (code, "")
        decision = json.loads(out)
        assert decision["outcome"] == outcome
        assert decision["policy"]["name"] == "default"

    def test_every_decision_is_logged_with_policy_identity(self, tmp_path: Path) -> None:
        """The decision record names the policy's name, version and digest."""
        log = tmp_path / "audit.jsonl"
        _, out, _ = cli(
            "evaluate", "--audit-log", str(log), str(EXAMPLES / "eviction-healthy.json")
        )
        activation, record = [json.loads(line) for line in log.read_text().splitlines()]
        decision = json.loads(out)
        assert (activation["kind"], record["kind"]) == ("policy_activated", "decision")
        assert record["decision_id"] == decision["decision_id"]
        assert record["policy"]["name"] == "default"
        assert record["policy"]["version"] == "1.0.0"
        assert record["policy"]["digest"] == decision["policy"]["digest"]

    def test_records_go_to_stderr_without_an_audit_log(self) -> None:
        """Without --audit-log the JSON record goes to stderr, never mixed into stdout."""
        code, out, err = cli("evaluate", str(EXAMPLES / "eviction-healthy.json"))
        assert code == 0
        assert json.loads(out)["outcome"] == "allow"
        kinds = [json.loads(line)["kind"] for line in err.splitlines()]
        assert kinds == ["policy_activated", "decision"]

    def test_audit_mode_refusal_exits_zero(self, tmp_path: Path) -> None:
        """In audit mode the verdict is kept but callers proceed."""
        policy = ROOT / "examples" / "policies" / "trial-audit.yaml"
        code, out, _ = cli(
            "evaluate",
            "--policy",
            str(policy),
            "--audit-log",
            str(tmp_path / "a.jsonl"),
            str(EXAMPLES / "eviction-utc-constraint.json"),
        )
        decision = json.loads(out)
        assert code == 0
        assert (decision["outcome"], decision["enforced"]) == ("deny", False)

    def test_policy_threshold_change_changes_the_decision(self, tmp_path: Path) -> None:
        """Tuning a threshold in YAML changes the decision, with no code change."""
        lenient = tmp_path / "lenient.yaml"
        lenient.write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: lenient, "
            "version: 1.0.0}\nspec:\n  eviction: {stability_delta: 0.5}\n"
        )
        doc = EXAMPLES / "eviction-unscoreable.json"
        log = str(tmp_path / "a.jsonl")
        _, default_out, _ = cli("evaluate", "--audit-log", log, str(doc))
        _, lenient_out, _ = cli("evaluate", "--audit-log", log, "--policy", str(lenient), str(doc))
        codes = [r["code"] for r in json.loads(default_out)["reasons"]]
        lenient_codes = [r["code"] for r in json.loads(lenient_out)["reasons"]]
        assert codes == ["unscoreable", "unstable_score"]
        assert lenient_codes == ["unscoreable"]

    def test_stdin_input(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """- (the default) reads the document from standard input."""
        doc = (EXAMPLES / "eviction-healthy.json").read_text()
        code, out, _ = cli(
            "evaluate", "--audit-log", str(tmp_path / "a.jsonl"), stdin=doc, monkeypatch=monkeypatch
        )
        assert code == 0
        assert json.loads(out)["check"] == "eviction"

    def test_text_format(self, tmp_path: Path) -> None:
        """--format text prints the verdict, reasons, actions and policy."""
        code, out, _ = cli(
            "evaluate",
            "--format",
            "text",
            "--audit-log",
            str(tmp_path / "a.jsonl"),
            str(EXAMPLES / "eviction-buf-definition.json"),
        )
        assert code == 1
        assert out.splitlines()[0] == "eviction: DENY (enforced)"
        assert "  -> pin turn-09" in out
        assert "policy: default@1.0.0 sha256:" in out

    def test_malformed_input_exits_two_with_located_errors(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Input problems name the line, column, path and value; nothing on stdout."""
        doc = '{"check": "eviction",\n "segment": {"id": "s", "kind": "turn"},\n "score": 1.5}'
        code, out, err = cli("evaluate", stdin=doc, monkeypatch=monkeypatch)
        assert (code, out) == (2, "")
        assert err == (
            "<stdin>:3:11: $.score: 1.5 is outside the policy's score range [0.0, 1.0]\n"
        )

    @pytest.mark.parametrize(
        ("doc", "message"),
        [
            ('{"check": "eviction", "score": NaN}', "NaN is not a valid JSON number"),
            ('{"check": "collapse", "check": "collapse", "history": []}', "duplicate key 'check'"),
            ("[1, 2", "invalid JSON"),
            ('{"check": "rewrite"}', "$.check: 'rewrite' is not one of"),
        ],
    )
    def test_bad_documents_exit_two(
        self, doc: str, message: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """NaN tokens, duplicate keys, broken JSON and unknown checks are input errors."""
        code, _, err = cli("evaluate", stdin=doc, monkeypatch=monkeypatch)
        assert code == 2
        assert message in err

    def test_missing_input_file_exits_two(self, tmp_path: Path) -> None:
        """An unreadable input is an input error."""
        code, _, err = cli("evaluate", str(tmp_path / "absent.json"))
        assert code == 2
        assert "cannot read" in err

    def test_invalid_policy_exits_three(self, tmp_path: Path) -> None:
        """A bad --policy is reported before any input is read."""
        bad = tmp_path / "bad.yaml"
        bad.write_text("kind: Policy\n")
        code, _, err = cli(
            "evaluate", "--policy", str(bad), str(EXAMPLES / "eviction-healthy.json")
        )
        assert code == 3
        assert "'apiVersion' is a required property" in err

    def test_audit_log_to_a_character_device(self) -> None:
        """/dev/null as the audit log works: a device with nothing to sync is not an error."""
        code, out, err = cli(
            "evaluate",
            "--audit-fsync",
            "always",
            "--audit-log",
            "/dev/null",
            str(EXAMPLES / "eviction-healthy.json"),
        )
        assert (code, err) == (0, "")
        assert json.loads(out)["outcome"] == "allow"

    def test_unwritable_audit_log_exits_two(self, tmp_path: Path) -> None:
        """An audit log that cannot be opened is a usage error, not a silent decision."""
        code, out, err = cli(
            "evaluate",
            "--audit-log",
            str(tmp_path / "no" / "dir.jsonl"),
            str(EXAMPLES / "eviction-healthy.json"),
        )
        assert (code, out) == (2, "")
        assert "cannot open audit log" in err


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers of ``parser`` (none when it has no subcommands)."""
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


class TestMisc:
    @pytest.mark.parametrize("name", ["policy", "input", "decision"])
    def test_schema_prints_json(self, name: str) -> None:
        """Each bundled schema is printed as JSON."""
        code, out, _ = cli("schema", name)
        assert code == 0
        assert json.loads(out)["$id"].endswith(f"{name}.v1.schema.json")

    def test_version(self) -> None:
        """--version prints the engine version."""
        code, out, _ = cli("--version")
        assert code == 0
        assert out.startswith("prunewarden ")

    def test_help_documents_exit_codes(self) -> None:
        """--help lists every exit code of ``ExitCode``, with the meaning docs/cli.md gives it
        (both come from ``EXIT_CODE_MEANINGS``)."""
        code, out, _ = cli("--help")
        assert code == 0
        assert out.endswith("\n" + exit_codes_epilog(EXIT_CODE_MEANINGS))
        assert "3   invalid policy" in out
        assert "4   test: a case failed" in out
        epilog = out.split("exit codes:")[1].splitlines()[1:]
        listed = [int(line.split()[0]) for line in epilog if not line.startswith("      ")]
        assert listed == sorted(int(code) for code in ExitCode)

    def test_every_help_lists_exit_codes_of_the_enum(self) -> None:
        """Each command's (and subcommand's) ``exit codes:`` epilog is generated: codes of
        ``ExitCode`` only, ascending, each once."""
        epilogs: dict[str, str] = {}
        for name, command in COMMANDS.items():
            add, _ = command.functions()
            pending = [(name, subparsers(_parser(io.StringIO(), name, add))[name])]
            while pending:
                label, parser = pending.pop()
                if parser.epilog and parser.epilog.startswith("exit codes:"):
                    epilogs[label] = parser.epilog
                pending += [(f"{label} {n}", p) for n, p in subparsers(parser).items()]
        assert {"doctor", "test", "diff", "mcp", "policy diff", "bundle verify"} <= set(epilogs)
        for label, epilog in epilogs.items():
            codes = [
                int(line.split()[0]) for line in epilog.splitlines()[1:] if line[2:3].isdigit()
            ]
            assert codes == sorted(set(codes)), label
            assert set(codes) <= {int(code) for code in ExitCode}, label

    def test_usage_error_exits_two_without_traceback(self) -> None:
        """An unknown command is a one-line usage error."""
        code, out, err = cli("frobnicate")
        assert (code, out) == (2, "")
        assert err.count("\n") == 1
        assert "invalid choice" in err
