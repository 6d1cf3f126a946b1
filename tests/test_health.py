"""``prunewarden doctor`` and :func:`prunewarden.health.diagnose`: a deployment in one line."""

from __future__ import annotations

import io
import json
import shutil
import tomllib
from pathlib import Path

import pytest
from _support.blocking import call_guarded, make_fifo
from prunewarden._extras import declared_extras
from prunewarden.cli._main import run
from prunewarden.health import diagnose

ROOT = Path(__file__).resolve().parent.parent
TRACE = str(ROOT / "examples" / "traces" / "collapse-narrowing.jsonl")
POLICY = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: prod, version: 1.0.0}
spec:
  eviction: {stability_delta: 0.25}
"""


FAKE_METADATA = """\
Metadata-Version: 2.1
Name: prunewarden
Version: 0.1.0
Provides-Extra: absent
Provides-Extra: all
Provides-Extra: here
Requires-Dist: pyyaml>=6.0
Requires-Dist: prunewarden-absent-dist>=1; extra == "absent"
Requires-Dist: prunewarden[absent]; extra == "all"
Requires-Dist: pyyaml; extra == "all"
Requires-Dist: prunewarden-absent-dist; sys_platform == "no-such-platform" and extra == "here"
Requires-Dist: pyyaml; extra == "here"
"""


def fake_metadata(site: Path) -> Path:
    """A folder holding prunewarden's metadata with extras of its own, first on sys.path: what
    doctor reads instead of the installed package's."""
    info = site / "prunewarden-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(FAKE_METADATA)
    return site


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    """A policy with its lock file, and an audit log of one replayed trace."""
    (tmp_path / "prod.yaml").write_text(POLICY)
    assert cli("policy", "lock", str(tmp_path / "prod.yaml"))[0] == 0
    log = tmp_path / "audit.jsonl"
    assert (
        cli("replay", "--policy", str(tmp_path / "prod.yaml"), "--audit-log", str(log), TRACE)[0]
        == 0
    )
    return tmp_path


def doctor(folder: Path, *more: str) -> tuple[int, str, str]:
    return cli(
        "doctor",
        "--policy",
        str(folder / "prod.yaml"),
        "--audit-log",
        str(folder / "audit.jsonl"),
        "--checkpoint",
        str(folder / "head"),
        *more,
    )


class TestDoctor:
    def test_healthy_deployment_is_one_ok_line(self, deployment: Path) -> None:
        """Policy, lock, audit log and checkpoint pass: one line starting ok, exit 0, and the
        checkpoint holds the chain's head."""
        code, out, err = doctor(deployment)
        assert (code, err) == (0, "")
        assert out.count("\n") == 1
        assert out.startswith("ok: policy prod@1.0.0 sha256:")
        assert f"locked by {deployment / 'policy.lock'}" in out
        assert "records verify" in out
        head = (deployment / "head").read_text().strip()
        assert head.startswith("sha256:")
        assert f"at {head[:19]}" in out

    def test_invalid_policy_fails_with_its_located_problem(self, deployment: Path) -> None:
        """A policy that does not load: exit 3, its first problem located in the line."""
        (deployment / "prod.yaml").write_text(POLICY.replace("0.25", "2.0"))
        code, out, _ = doctor(deployment)
        assert code == 3
        assert out.startswith(f"FAIL: policy {deployment / 'prod.yaml'}:5:")
        assert "stability_delta" in out
        assert "; ok: audit" in out

    def test_content_changed_under_a_locked_version_fails(self, deployment: Path) -> None:
        """The lock file refuses new content under a locked name@version: exit 3."""
        (deployment / "prod.yaml").write_text(POLICY.replace("0.25", "0.2"))
        code, out, _ = doctor(deployment)
        assert code == 3
        assert out.startswith("FAIL: policy ")
        assert "prod@1.0.0" in out

    def test_tampered_chain_fails(self, deployment: Path) -> None:
        """An altered record: exit 5, the broken line named."""
        log = deployment / "audit.jsonl"
        lines = log.read_text().splitlines(keepends=True)
        lines[3] = lines[3].replace('"allow"', '"deny"', 1)
        log.write_text("".join(lines))
        code, out, _ = doctor(deployment)
        assert code == 5
        assert out.startswith(f"FAIL: audit chain fails: {log}:4:")

    def test_records_cut_after_the_checkpoint_fail(self, deployment: Path) -> None:
        """Whole records cut from the end since the last checkpoint: exit 5."""
        assert doctor(deployment)[0] == 0
        log = deployment / "audit.jsonl"
        lines = log.read_text().splitlines(keepends=True)
        log.write_text("".join(lines[:-2]))
        code, out, _ = doctor(deployment)
        assert code == 5
        assert "is not in the chain" in out

    def test_checkpoint_advances_with_the_log(self, deployment: Path) -> None:
        """Records appended after a checkpoint are fine; the checkpoint moves to the new head."""
        assert doctor(deployment)[0] == 0
        first = (deployment / "head").read_text()
        policy = str(deployment / "prod.yaml")
        cli("replay", "--policy", policy, "--audit-log", str(deployment / "audit.jsonl"), TRACE)
        code, out, _ = doctor(deployment)
        assert code == 0
        assert "checkpoint held" in out
        assert (deployment / "head").read_text() != first

    def test_a_fifo_as_the_checkpoint_is_refused_without_blocking(self, deployment: Path) -> None:
        """A checkpoint that is not a regular file is a usage error (exit 2) naming it, not a
        read that waits for a writer forever; the FIFO is left as it was."""
        fifo = make_fifo(deployment / "head")
        code, out, _ = call_guarded(lambda: doctor(deployment), fifo)
        assert code == 2
        reason = "cannot read: a FIFO, not a regular file: only regular files are read"
        assert out.startswith(f"FAIL: checkpoint {fifo}: {reason}; ok: policy ")
        assert fifo.is_fifo()

    def test_a_fifo_audit_log_without_a_reader_fails_without_blocking(
        self, deployment: Path
    ) -> None:
        """A FIFO as the audit log is a stream sink: with nobody reading it no record can go
        out (exit 2), said at once instead of waiting for a reader."""
        fifo = make_fifo(deployment / "audit.fifo")
        argv = ("doctor", "--policy", str(deployment / "prod.yaml"), "--audit-log", str(fifo))
        code, out, _ = call_guarded(lambda: cli(*argv), fifo)
        assert code == 2
        assert out.startswith(f"FAIL: audit {fifo}: not writable: a FIFO with no reader; ok: ")

    def test_a_character_device_audit_log_has_nothing_to_verify(self, deployment: Path) -> None:
        """/dev/null as the audit log is writable; its chain is not kept, so none is read."""
        argv = ("doctor", "--policy", str(deployment / "prod.yaml"), "--audit-log", "/dev/null")
        code, out, _ = call_guarded(lambda: cli(*argv))
        assert code == 0
        assert "; audit /dev/null writable (a character device: its chain is not kept, " in out

    def test_unwritable_audit_log_fails(self, deployment: Path) -> None:
        """An audit log whose folder does not exist cannot be written: exit 2."""
        blocker = deployment / "file"
        blocker.write_text("")
        code, out, _ = cli(
            "doctor", "--policy", str(deployment / "prod.yaml"), "--audit-log", f"{blocker}/a.log"
        )
        assert code == 2
        assert out.startswith(f"FAIL: audit {blocker}/a.log: not writable: no folder {blocker}")

    def test_a_new_log_in_a_writable_folder_is_fine(self, deployment: Path) -> None:
        """No records yet is healthy when the log can be created."""
        code, out, _ = cli(
            "doctor",
            "--policy",
            str(deployment / "prod.yaml"),
            "--audit-log",
            str(deployment / "new.jsonl"),
        )
        assert code == 0
        assert "new.jsonl writable, no records yet" in out
        assert not (deployment / "new.jsonl").exists()

    def test_missing_extra_fails(self, deployment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A required extra whose requirement is not installed, as the package's metadata
        declares it: exit 2, naming the extra, how to install it and what is missing. An extra
        naming another (``prunewarden[absent]``) needs that one's requirements too; one for
        another platform is not required."""
        monkeypatch.syspath_prepend(str(fake_metadata(deployment / "site")))
        code, out, _ = doctor(deployment, "--extra", "all")
        assert code == 2
        assert out.startswith(
            "FAIL: extras not installed: all (pip install 'prunewarden[all]'): "
            "all needs prunewarden-absent-dist>=1; ok: policy"
        )
        assert doctor(deployment, "--extra", "here")[0] == 0

    def test_an_unknown_extra_lists_the_extras(self, deployment: Path) -> None:
        """An extra the package does not declare: exit 2, with the ones it does."""
        code, out, _ = doctor(deployment, "--extra", "sqll")
        assert code == 2
        assert out.startswith("FAIL: extras unknown: sqll (the extras of prunewarden: ")
        assert ", sql, " in out

    def test_every_declared_extra_is_known(self, deployment: Path) -> None:
        """doctor knows every extra of pyproject.toml (read from the installed metadata, under
        its normalized name), installed here by the test extra."""
        declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]
        assert set(declared_extras()) == set(declared)
        names = [name for name in declared if name != "realdata"]  # make realdata's, not CI's
        wanted = [part for name in names for part in ("--extra", name)]
        code, out, _ = doctor(deployment, *wanted, "--extra", "Cel_Native")  # cel-native again
        assert (code, out.startswith("ok: ")) == (0, True), out
        assert out.endswith(f"; extras {', '.join(names)} installed\n")

    def test_json_format_has_every_finding(self, deployment: Path) -> None:
        """--format json: the verdict, the exit code and each finding, as one JSON document."""
        code, out, _ = doctor(deployment, "--extra", "sqll", "--format", "json")
        document = json.loads(out)
        assert code == document["exit_code"] == 2
        assert document["ok"] is False
        checks = [(f["check"], f["ok"], f["exit_code"]) for f in document["findings"]]
        assert checks == [
            ("policy", True, 0),
            ("audit", True, 0),
            ("checkpoint", True, 0),
            ("extras", False, 2),
        ]

    def test_every_check_runs(self, deployment: Path) -> None:
        """Several problems are all named; the exit code is the first failing check's."""
        (deployment / "prod.yaml").write_text(POLICY.replace("0.25", "2.0"))
        (deployment / "audit.jsonl").write_text("not a record\n")
        diagnosis = diagnose(
            str(deployment / "prod.yaml"), audit_log=str(deployment / "audit.jsonl")
        )
        assert [f.check for f in diagnosis.findings if not f.ok] == ["policy", "audit"]
        assert diagnosis.exit_code == 3

    def test_shadow_is_checked(self, deployment: Path) -> None:
        """A shadow candidate that does not load fails the deployment too."""
        shutil.copy(deployment / "prod.yaml", deployment / "candidate.yaml")
        (deployment / "candidate.yaml").write_text(POLICY.replace("1.0.0", "1.1.0") + "bad: [\n")
        code, out, _ = doctor(deployment, "--shadow", str(deployment / "candidate.yaml"))
        assert code == 3
        assert out.startswith(f"FAIL: shadow {deployment / 'candidate.yaml'}:")
