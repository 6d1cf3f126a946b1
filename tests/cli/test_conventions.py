"""What a new user expects of every command: ``--format json`` where a command reports, and a
progress line on standard error for a command that can run for long."""

from __future__ import annotations

import importlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from prunewarden import Engine
from prunewarden.audit import AuditLog
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = ROOT / "examples" / "deployments"
TRACES = ROOT / "examples" / "traces"
INPUT = ROOT / "examples" / "inputs" / "collapse-healthy.json"


def cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run(list(argv), stdout, stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def _json(*argv: str) -> tuple[int, Any]:
    code, out, err = cli(*argv, "--format", "json")
    assert err == ""
    return code, json.loads(out)


class TestValidateJson:
    def test_valid_and_invalid_files_in_one_document(self) -> None:
        """Each file's policy or its located problems, nothing on stderr, exit 3 as in text."""
        good, bad = ROOT / "policies" / "default.yaml", DEPLOYMENTS / "replay.yaml"
        code, document = _json("validate", str(good), str(bad))
        assert code == 3
        assert document["valid"] is False
        first, second = document["files"]
        assert (first["valid"], first["policy"]["name"]) == (True, "default")
        assert first["policy"]["digest"].startswith("sha256:")
        assert second["valid"] is False
        problem = second["problems"][0]
        assert (problem["file"], problem["path"]) == (str(bad), "$.spec.collapse.spread_floor")
        assert problem["line"] > 0

    def test_all_valid_exits_0(self) -> None:
        code, document = _json("validate", str(ROOT / "policies" / "default.yaml"))
        assert (code, document["valid"]) == (0, True)


class TestAuditVerifyJson:
    def test_an_intact_log(self, tmp_path: Path) -> None:
        """ok, each file's records and head, no findings; exit 0."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            Engine.default(audit=audit).evaluate(json.loads(INPUT.read_text()))
        code, document = _json("audit", "verify", str(log))
        assert code == 0
        assert document["ok"] is True
        (file,) = document["files"]
        assert (file["file"], file["intact"], file["broken_at"]) == (str(log), True, None)
        assert file["head"].startswith("sha256:")
        assert document["findings"] == []

    def test_a_broken_log_exits_5_with_the_finding(self, tmp_path: Path) -> None:
        """An edited record: ok false, the file broken at its line, the fatal finding."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            Engine.default(audit=audit).evaluate(json.loads(INPUT.read_text()))
        lines = log.read_text().splitlines(keepends=True)
        log.write_text(lines[0] + lines[1].replace('"allow"', '"deny"', 1))
        code, document = _json("audit", "verify", str(log))
        assert code == 5
        assert document["ok"] is False
        assert document["files"][0]["broken_at"] == 2
        assert [f["fatal"] for f in document["findings"]] == [True]
        assert document["findings"][0]["line"] == 2


class TestPolicyLockJson:
    def test_entries_added_and_kept(self, tmp_path: Path) -> None:
        """Each entry with its lock file, digest and state; exit 0."""
        folder = tmp_path / "deployments"
        shutil.copytree(DEPLOYMENTS, folder)
        code, document = _json("policy", "lock", str(folder / "staging.yaml"))
        assert code == 0
        assert document["locked"] is True
        assert {entry["policy"]: entry["state"] for entry in document["entries"]} == {
            "platform-base@2.0.0": "unchanged",
            "staging@0.9.0": "unchanged",
        }
        assert document["problems"] == []

    def test_a_reused_version_is_a_problem_in_the_document(self, tmp_path: Path) -> None:
        """Changed content under a locked version: locked false, the problem located, exit 3."""
        folder = tmp_path / "deployments"
        shutil.copytree(DEPLOYMENTS, folder)
        staging = folder / "staging.yaml"
        staging.write_text(staging.read_text().replace("spread_floor: 0.12", "spread_floor: 0.13"))
        code, document = _json("policy", "lock", str(staging))
        assert code == 3
        assert document["locked"] is False
        assert "reused for different content" in document["problems"][0]["message"]


class TestCalibrate:
    ARGS = (
        "calibrate",
        "--healthy",
        str(TRACES / "healthy-homogeneous.jsonl"),
        str(TRACES / "healthy-session.jsonl"),
        "--collapsed",
        str(TRACES / "collapse-narrowing.jsonl"),
        "--base",
        "builtin:default",
        "--date",
        "2026-01-31",
        "--spread-test",  # a fit that disables no signal: nothing refused, nothing warned
        "cusum",
    )

    def test_json_holds_the_fit_and_each_trace(self, tmp_path: Path) -> None:
        """The base, the fitted policy and its file, the calibration and each trace's halts."""
        out = tmp_path / "fit.yaml"
        code, document = _json(*self.ARGS, "--out", str(out))
        assert code == 0
        assert document["base"]["name"] == document["fitted"]["name"] == "default"
        assert document["fitted"]["file"] == str(out)
        assert document["calibration"]["date"] == "2026-01-31"
        roles = [row["role"] for row in document["traces"]]
        assert roles == ["healthy", "healthy", "collapsed"]
        assert document["traces"][2]["fitted_halt"]["cycle"] > 0
        assert document["missed"] == []

    def test_progress_names_each_stage(self, tmp_path: Path) -> None:
        """--progress: a line on stderr as each stage begins, and the replays' progress."""
        code, _, err = cli(*self.ARGS, "--out", str(tmp_path / "fit.yaml"), "--progress")
        assert code == 0
        lines = err.splitlines()
        assert lines[0] == "calibrate: reading 3 trace(s)"
        assert "calibrate: fitting to 2 healthy trace(s)" in lines
        assert "calibrate: replaying 3 trace(s) under the base and the fit" in lines
        assert lines[-1] == "calibrate: done"

    def test_silent_when_stderr_is_not_a_terminal(self, tmp_path: Path) -> None:
        """Without --progress, a log or a pipe gets no progress lines."""
        code, _, err = cli(*self.ARGS, "--out", str(tmp_path / "fit.yaml"))
        assert (code, err) == (0, "")


class TestMissingExtra:
    @pytest.fixture
    def signed(self, tmp_path: Path) -> tuple[Path, Path]:
        """A bundle signed with a new key, and the key's public half."""
        private, public = tmp_path / "key.pem", tmp_path / "key.pub"
        bundle = tmp_path / "b.tar.gz"
        policy = str(ROOT / "policies" / "default.yaml")
        assert cli("bundle", "keygen", "--private", str(private), "--public", str(public))[0] == 0
        assert cli("bundle", "build", "--revision", "r1", "--out", str(bundle), policy)[0] == 0
        assert cli("bundle", "sign", "--key", str(private), str(bundle))[0] == 0
        return bundle, public

    def test_bundle_verify_names_the_extra_and_exits_2(
        self, signed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """bundle verify without cryptography: exit 2 and the pip line, not an internal error."""
        bundle, public = signed
        _hide_cryptography(monkeypatch)
        code, out, err = cli("bundle", "verify", "--key", str(public), str(bundle))
        assert (code, out) == (2, "")
        assert err == (
            "prunewarden: signing and verifying bundles needs the bundle extra: "
            "pip install 'prunewarden[bundle]'\n"
        )

    def test_bundle_keygen_too(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every command reaching a missing extra exits 2, keygen included."""
        _hide_cryptography(monkeypatch)
        code, _, err = cli(
            "bundle", "keygen", "--private", str(tmp_path / "k"), "--public", str(tmp_path / "p")
        )
        assert code == 2
        assert "pip install 'prunewarden[bundle]'" in err
        assert "internal error" not in err


def _hide_cryptography(monkeypatch: pytest.MonkeyPatch) -> None:
    """cryptography as if it were not installed: importing it fails."""
    real = importlib.import_module

    def import_module(name: str, package: str | None = None) -> Any:
        if name.split(".", maxsplit=1)[0] == "cryptography":
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", import_module)


class TestStandardInput:
    def test_validate_reads_a_policy_from_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """validate - : the policy on stdin, named <stdin> in what is printed."""
        _stdin(monkeypatch, (ROOT / "policies" / "default.yaml").read_bytes())
        code, out, _ = cli("validate", "-")
        assert code == 0
        assert out.startswith("<stdin>: valid (default@1.0.0 sha256:")

    def test_a_bad_policy_on_stdin_is_located_there(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A problem of a policy read from stdin: <stdin>:LINE:COL: $.path, exit 3."""
        text = (ROOT / "policies" / "default.yaml").read_text()
        _stdin(monkeypatch, text.replace("spread_floor: 0.08", "spread_floor: -1").encode())
        code, _, err = cli("validate", "-")
        assert code == 3
        assert err.startswith("<stdin>:")
        assert "$.spec.collapse.spread_floor: -1 is less than the minimum of 0" in err

    def test_validate_holds_stdin_to_the_lock_given(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """validate --lock FILE - : changed content under a locked version is refused."""
        text = (DEPLOYMENTS / "staging.yaml").read_text().replace("0.12", "0.13")
        _stdin(monkeypatch, text.encode())
        monkeypatch.chdir(DEPLOYMENTS)  # extends base.yaml, read from the working directory
        code, _, err = cli("validate", "--lock", "policy.lock", "-")
        assert code == 3
        assert "version 0.9.0 reused for different content" in err

    @pytest.mark.parametrize("fmt", ["text", "json"])
    def test_audit_verify_reads_a_log_from_stdin(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
    ) -> None:
        """audit verify - : the log on stdin verifies and is named <stdin>, not a spooled copy."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            Engine.default(audit=audit).evaluate(json.loads(INPUT.read_text()))
        _stdin(monkeypatch, log.read_bytes())
        code, out, err = cli("audit", "verify", "--format", fmt, "-")
        assert (code, err) == (0, "")
        if fmt == "text":
            assert out.startswith("<stdin>: ok, 2 records")
        else:
            assert json.loads(out)["files"][0]["file"] == "<stdin>"

    def test_a_cut_log_on_stdin_fails_naming_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A partial record on stdin: exit 5, the finding names <stdin>."""
        _stdin(monkeypatch, b'{"record_version": 2, "kind": "decision"')
        code, out, err = cli("audit", "verify", "-")
        assert code == 5
        assert out == "<stdin>: FAILED at line 1 (0 records before it verify)\n"
        assert err.startswith("<stdin>:1: partial last record")


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


class TestTracesFromStandardInput:
    def test_replay_reads_a_trace_from_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """replay - : the trace on stdin replays as the file does, named <stdin>."""
        trace = TRACES / "collapse-narrowing.jsonl"
        code, from_file, _ = cli("replay", str(trace))
        _stdin(monkeypatch, trace.read_bytes())
        assert cli("replay", "-") == (code, from_file.replace(str(trace), "<stdin>"), "")

    def test_diff_reads_a_trace_from_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """diff - : the same changes as with the file."""
        trace = TRACES / "collapse-narrowing.jsonl"
        policies = ("--base", "builtin:default", "--candidate", str(DEPLOYMENTS / "prod-eu.yaml"))
        code, from_file, _ = cli("diff", *policies, str(trace))
        _stdin(monkeypatch, trace.read_bytes())
        assert cli("diff", *policies, "-")[:2] == (code, from_file.replace(str(trace), "<stdin>"))


class TestPolicyFromStandardInput:
    def test_policy_show_reads_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """policy show - : the policy on stdin, each value located at <stdin>:LINE."""
        monkeypatch.chdir(DEPLOYMENTS)  # its extends: base.yaml
        _stdin(monkeypatch, (DEPLOYMENTS / "prod-eu.yaml").read_bytes())
        code, out, _ = cli("policy", "show", "-")
        assert code == 0
        assert "apiVersion: prunewarden/v1" in out
        assert "# <stdin>:5" in out

    def test_policy_diff_against_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """policy diff FILE - : an edit piped in is compared with the file (exit 1)."""
        monkeypatch.chdir(DEPLOYMENTS)
        edited = (
            (DEPLOYMENTS / "prod-eu.yaml")
            .read_text()
            .replace("consecutive_cycles: 3", "consecutive_cycles: 4")
        )
        _stdin(monkeypatch, edited.encode())
        code, out, _ = cli("policy", "diff", "prod-eu.yaml", "-")
        assert code == 1
        assert "~ spec.collapse.consecutive_cycles: 3 -> 4" in out
        assert "b: <stdin>:14" in out
