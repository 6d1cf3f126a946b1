"""``audit export --parquet`` and replay's Parquet decisions: verified first, partitioned by date
and check, and counted by DuckDB as ``audit report`` counts the logs."""

from __future__ import annotations

import errno
import hashlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prunewarden import Engine
from prunewarden._parquet import ParquetError
from prunewarden.audit import decision_rows, seal
from prunewarden.audit._chain import GENESIS
from prunewarden.audit._record import policy_activated_record
from prunewarden.cli import _replay as cli_replay
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted(str(path) for path in (ROOT / "examples" / "traces").glob("*.jsonl"))
LOOSE = str(ROOT / "examples" / "policies" / "loose-candidate.yaml")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def parquet_rows(folder: Path, statement: str) -> list[tuple[Any, ...]]:
    """``statement`` over the view ``decisions`` of a Parquet folder, in DuckDB directly."""
    with duckdb.connect(":memory:") as connection:
        parquet = connection.read_parquet(f"{folder}/**/*.parquet", hive_partitioning=True)
        parquet.create_view("decisions")
        return connection.execute(statement).fetchall()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """One log of the example traces replayed under two policy versions."""
    path = tmp_path / "audit.jsonl"
    for policy in ("policies/default.yaml", LOOSE):
        code, _, err = cli(
            "replay", *TRACES, "--policy", str(ROOT / policy), "--audit-log", str(path)
        )
        assert (code, err) == (0, "")
    return path


HALTS_PER_VERSION_PER_DAY = """
    SELECT policy_version, CAST(date AS VARCHAR), count(*) FROM decisions
    WHERE outcome = 'halt' GROUP BY ALL ORDER BY ALL
"""


class TestAuditExport:
    def test_duckdb_counts_halts_per_version_per_day_as_audit_report(
        self, log: Path, tmp_path: Path
    ) -> None:
        """Halts per policy version per day from the Parquet equal audit report's counts for
        each day."""
        out = tmp_path / "parquet"
        code, text, err = cli("audit", "export", "--parquet", str(out), str(log))
        assert (code, err) == (0, "")
        assert text.endswith(f"-> {out}\n")
        from_parquet = parquet_rows(out, HALTS_PER_VERSION_PER_DAY)
        days = sorted({day for _, day, _ in from_parquet})
        assert days
        expected = []
        for day in days:
            code, report, _ = cli(
                "audit", "report", str(log), "--outcome", "halt", "--format", "json",
                "--since", day, "--until", f"{day}T23:59:59.999999Z",
            )  # fmt: skip
            assert code == 0
            by_version = Counter[str]()
            for row in map(json.loads, report.splitlines()):
                if "halt_episodes" in row:  # the report's per-session episode lines
                    continue
                by_version[row["policy_version"]] += row["count"]
            expected += [(version, day, n) for version, n in sorted(by_version.items())]
        assert from_parquet == expected
        assert {version for version, _, _ in from_parquet} == {"1.0.0", "1.1.0-rc.1"}

    def test_every_decision_is_a_row_partitioned_by_date_and_check(
        self, log: Path, tmp_path: Path
    ) -> None:
        """One row per decision record, in date=/check= folders."""
        out = tmp_path / "parquet"
        assert cli("audit", "export", "--parquet", str(out), str(log))[0] == 0
        records = [json.loads(line) for line in log.read_text().splitlines()]
        decisions = [row for record in records for row in decision_rows(record)]
        assert any(record["kind"] == "pass" for record in records)
        rows = parquet_rows(out, 'SELECT decision_id, "check", outcome FROM decisions')
        assert sorted(rows) == sorted(
            (d["decision_id"], d["check"], d["outcome"]) for d in decisions
        )
        folders = {path.parent.relative_to(out).as_posix() for path in out.rglob("*.parquet")}
        day = decisions[0]["ts"][:10]
        assert folders == {
            f"date={day}/check={check}" for check in ("collapse", "eviction", "staleness")
        }

    def test_a_broken_chain_is_not_exported(self, log: Path, tmp_path: Path) -> None:
        """A log that does not verify exits 5 and writes nothing."""
        lines = log.read_text().splitlines(keepends=True)
        lines[3] = lines[3].replace('"allow"', '"deny"', 1)
        log.write_text("".join(lines))
        out = tmp_path / "parquet"
        code, _, err = cli("audit", "export", "--parquet", str(out), str(log))
        assert code == 5
        assert err.endswith("nothing exported: the logs do not verify\n")
        assert not out.exists()

    def test_audit_sql_reads_the_exported_folder(self, log: Path, tmp_path: Path) -> None:
        """audit sql given the folder runs over its decisions view, as over the log."""
        out = tmp_path / "parquet"
        assert cli("audit", "export", "--parquet", str(out), str(log))[0] == 0
        statement = (
            'SELECT "check", outcome, count(*) AS n FROM decisions GROUP BY ALL ORDER BY ALL'
        )
        code, from_folder, err = cli("audit", "sql", statement, str(out), "--format", "json")
        assert (code, err) == (0, "")
        assert cli("audit", "sql", statement, str(log), "--format", "json")[1] == from_folder


class TestVersions:
    def test_a_v1_log_is_not_exported(self, tmp_path: Path) -> None:
        """A log holding record_version 1 records fails the verification export runs first,
        naming the version; no row is written."""
        log = tmp_path / "old.jsonl"
        log.write_bytes(_v1_records())
        out = tmp_path / "parquet"
        code, printed, err = cli("audit", "export", "--parquet", str(out), str(log))
        assert code == 5
        assert "record_version 1 was written before the first release" in printed + err
        assert not list(out.glob("**/*.parquet"))


def _v1_records() -> bytes:
    """An activation and one decision as record_version 1 wrote them."""
    engine = Engine.default(logger=None)
    activation = {**policy_activated_record(engine.policy), "record_version": 1}
    text = json.dumps(activation["document"], sort_keys=True, separators=(",", ":"))
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    activation["policy"] = {**activation["policy"], "digest": digest}
    decision = {
        "record_version": 1, "kind": "decision", "decision_id": "0" * 32,
        "ts": "2025-11-14T10:15:00.000000Z", "check": "eviction", "outcome": "allow",
        "enforced": True, "reasons": [{"code": "authorized", "message": "ok", "detail": {}}],
        "actions": [], "subject": {"segment": {"id": "s41", "kind": "turn", "text_length": 0,
        "text_sha256": "0" * 64}}, "session_id": None, "labels": {},
        "policy": activation["policy"], "engine_version": "0.1.0",
        "input_digest": "sha256:" + "1" * 64,
    }  # fmt: skip
    first, last = seal(activation, GENESIS, None)
    second, _ = seal(decision, last, None)
    return first + second


class TestReplayParquet:
    def test_decisions_as_parquet_match_the_json_lines(self, tmp_path: Path) -> None:
        """--format parquet writes one row per decision the JSON lines hold, passes expanded."""
        lines, folder = tmp_path / "d.jsonl", tmp_path / "d"
        assert cli("replay", *TRACES, "--decisions", str(lines))[0] == 0
        code, out, err = cli("replay", *TRACES, "--decisions", str(folder), "--format", "parquet")
        assert (code, err) == (0, "")
        assert out.startswith("policy default@1.0.0")
        expected = Counter[tuple[str, str, int]]()
        for line in lines.read_text().splitlines():
            record = json.loads(line)
            decisions = record["plan"]["decisions"] if "plan" in record else [record["decision"]]
            for decision in decisions:
                expected[(decision["check"], decision["outcome"], record["event"])] += 1
        rows = parquet_rows(folder, 'SELECT "check", outcome, event FROM decisions')
        assert Counter(rows) == expected

    def test_parquet_needs_a_folder(self) -> None:
        """--format parquet without --decisions DIR is a usage error (exit 2)."""
        code, _, err = cli("replay", TRACES[0], "--format", "parquet")
        assert code == 2
        assert "give --decisions DIR" in err

    def test_a_file_where_the_folder_goes_is_refused_before_the_run(self, tmp_path: Path) -> None:
        """--decisions naming a file with --format parquet is a usage error (exit 2) before
        any trace is replayed; the write failed after the whole run with exit 70."""
        taken = tmp_path / "decisions"
        taken.write_text("kept\n")
        code, out, err = cli("replay", *TRACES, "--decisions", str(taken), "--format", "parquet")
        assert (code, out) == (2, "")
        assert err == f"{taken}: --decisions with --format parquet takes a folder, not a file\n"
        assert taken.read_text() == "kept\n"

    def test_a_folder_that_cannot_be_written_is_a_usage_error(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A folder that fails while the decisions are written (gone, full, unwritable) is
        reported as a usage error naming it, not an internal error."""

        def failing(lines: object, directory: str) -> int:
            raise ParquetError(errno.ENOSPC, "cannot write: No space left on device")

        monkeypatch.setattr(cli_replay, "write_decisions_parquet", failing)
        folder = tmp_path / "d"
        code, _, err = cli("replay", TRACES[0], "--decisions", str(folder), "--format", "parquet")
        assert code == 2
        assert err == f"{folder}: cannot write: No space left on device\n"
