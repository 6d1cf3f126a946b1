"""A pruning pass is one audit record (audit-record.v3 for an eviction pass decided over columns,
v2 otherwise), sealed over RFC 8785; readers see its decisions, and logs of record_version 1 and
2 still verify and read."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, Engine, parse_policy
from prunewarden._json import encode_canonical
from prunewarden._resources import schema
from prunewarden._values import replace_value
from prunewarden.audit import decision_rows, pass_record, seal, verdict_entry
from prunewarden.audit._chain import GENESIS, canonical_record
from prunewarden.audit._record import policy_activated_record, policy_reload_failed_record
from prunewarden.cli._main import run
from prunewarden.inputs import CollapseRequest
from prunewarden.inputs._model import Snapshot

ROOT = Path(__file__).resolve().parents[2]
VERIFIER = ROOT / "examples" / "verify" / "jcs_verify.mjs"
RECORD = Draft202012Validator(schema("audit-record"))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def item(segment_id: str, perturbed: float | None = 0.11) -> dict[str, Any]:
    segment = {"id": segment_id, "kind": "turn", "text": "é", "tombstone_written": True}
    return {"segment": segment, "score": 0.1, "perturbed_score": perturbed}


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, tuple[Any, ...]]:
    """A log with one eviction pass (seg-1 refused: no perturbed score) and one plan."""
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as audit:
        engine = Engine.default(audit=audit)
        decisions = engine.authorize_evictions([item("seg-0"), item("seg-1", None), item("é-2")])
        window = [{"id": f"w{i}", "kind": "turn", "score": i / 8, "tokens": 5} for i in range(3)]
        engine.plan({"segments": window, "free_tokens": 5})
    return path, decisions


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class TestPassRecord:
    def test_one_record_per_pass_valid_under_v3(self, log: tuple[Path, Any]) -> None:
        """An eviction pass (record_version 3, columns) and a plan (2) are one pass record
        each, valid under audit-record.v3."""
        path, _ = log
        written = records(path)
        assert [r["kind"] for r in written] == ["policy_activated", "pass", "pass"]
        assert [r["pass"] for r in written[1:]] == ["evictions", "plan"]
        assert [r["record_version"] for r in written] == [2, 3, 2]
        for record in written:
            assert list(RECORD.iter_errors(record)) == []

    def test_a_v3_pass_holds_the_columns(self, log: tuple[Path, Any]) -> None:
        """The eviction pass's record holds the segment ids, a reason bitmask per segment
        against its code table, the outcomes as one character each, no verdict objects."""
        path, _ = log
        record = records(path)[1]
        assert "verdicts" not in record
        assert record["segments"] == ["seg-0", "seg-1", "é-2"]
        assert record["codes"][:4] == [
            "authorized",
            "pinned",
            "unscoreable",
            "perturbation_missing",
        ]
        missing = 1 << record["codes"].index("perturbation_missing")
        assert record["reasons"] == [1, missing, 1]
        assert (record["allowed"], record["refusal"], record["enforced"]) == ("101", "deny", True)
        assert record["dependencies"] == {}

    def test_decisions_carry_the_pass_id_and_index(self, log: tuple[Path, Any]) -> None:
        """Each decision is <pass_id>-<index>, with the pass's one time; decision.v1 holds it."""
        path, decisions = log
        record = records(path)[1]
        assert [d.decision_id for d in decisions] == [f"{record['pass_id']}-{i}" for i in range(3)]
        assert {d.evaluated_at for d in decisions} == {record["ts"]}
        decision_schema = Draft202012Validator(schema("decision"))
        assert list(decision_schema.iter_errors(decisions[1].to_dict())) == []
        assert decisions[1].to_dict()["index"] == 1

    def test_rows_are_the_decisions_of_the_pass(self, log: tuple[Path, Any]) -> None:
        """decision_rows shapes each verdict as a decision record, in order."""
        path, decisions = log
        rows = decision_rows(records(path)[1])
        assert [r["decision_id"] for r in rows] == [d.decision_id for d in decisions]
        assert [r["subject"] for r in rows] == [
            {"segment": {"id": "seg-0"}},
            {"segment": {"id": "seg-1"}},
            {"segment": {"id": "é-2"}},
        ]
        assert [r["reasons"][0]["code"] for r in rows] == [
            "authorized",
            "perturbation_missing",
            "authorized",
        ]


class TestReaders:
    def test_query_by_subject_finds_the_segment(self, log: tuple[Path, Any]) -> None:
        """audit query --subject finds one segment's verdict inside a pass, ASCII or not."""
        path, decisions = log
        for wanted, decision in (("seg-1", decisions[1]), ("é-2", decisions[2])):
            code, out, _ = cli("audit", "query", "--subject", wanted, "--format", "json", str(path))
            assert code == 0
            (row,) = [json.loads(line) for line in out.splitlines()]
            assert (row["decision_id"], row["outcome"]) == (decision.decision_id, decision.outcome)

    def test_report_counts_every_verdict(self, log: tuple[Path, Any]) -> None:
        """audit report counts the verdicts of passes."""
        path, _ = log
        code, out, _ = cli("audit", "report", "--format", "json", str(path))
        assert code == 0
        rows = [json.loads(line) for line in out.splitlines()]
        counted = {(r["check"], r["outcome"], r["reason"]): r["count"] for r in rows}
        assert counted[("eviction", "allow", "authorized")] == 2
        assert counted[("eviction", "deny", "perturbation_missing")] == 1

    def test_show_policy_names_the_policy_of_one_verdict(self, log: tuple[Path, Any]) -> None:
        """audit show-policy takes <pass_id>-<index>."""
        path, decisions = log
        code, out, _ = cli("audit", "show-policy", decisions[1].decision_id, str(path))
        assert code == 0
        assert f"authorized decision {decisions[1].decision_id}" in out

    def test_sql_decisions_view_has_a_row_per_verdict(self, log: tuple[Path, Any]) -> None:
        """The decisions view of audit sql unnests passes: one row per verdict, with its pass."""
        pytest.importorskip("duckdb")
        path, decisions = log
        statement = (
            "SELECT decision_id, segment_id, reason FROM decisions WHERE pass_id IS NOT NULL"
        )
        code, out, err = cli("audit", "sql", "--format", "json", statement, str(path))
        assert code == 0, err
        rows = [json.loads(line) for line in out.splitlines()]
        evictions = [r for r in rows if r["decision_id"].startswith(decisions[0].pass_id)]
        assert [(r["segment_id"], r["reason"]) for r in evictions] == [
            ("seg-0", "authorized"),
            ("seg-1", "perturbation_missing"),
            ("é-2", "authorized"),
        ]


class TestLargePassRecordsInSql:
    """``audit sql`` over pass records far larger than DuckDB's 16 MiB default object size."""

    @staticmethod
    def log_with_pass_of(path: Path, verdicts: int, version: int = 3, pad: int = 200) -> Path:
        """A log whose last record is a pass of ``verdicts`` verdicts (record_version 3:
        columns; 2: a verdict object each), sealed like any other (built from a real pass
        record: a pass over that many segments takes long to decide)."""
        with AuditLog(path) as audit:
            # A shadow policy sends the pass down the general path: a version 2 record.
            shadow = Engine.default().policy if version == 2 else None
            Engine.default(audit=audit, shadow=shadow).authorize_evictions([item("seg-0")])
        *before, last = path.read_bytes().splitlines(keepends=True)
        record = {k: v for k, v in json.loads(last).items() if k not in ("hash", "prev_hash")}
        assert record["record_version"] == version
        ids = [f"{i:06d}-" + "x" * pad for i in range(verdicts)]
        if version == 2:
            verdict = record["verdicts"][0]
            record["verdicts"] = [{**verdict, "segment": own} for own in ids]
        else:
            record.update(segments=ids, reasons=[1] * verdicts, allowed="1" * verdicts)
        line, _ = seal(record, json.loads(before[-1])["hash"], None)
        path.write_bytes(b"".join([*before, line]))
        return path

    # DuckDB reads a line of up to twice its maximum_object_size (16 MiB by default): the record
    # below is past that, and holds enough verdicts that a view quadratic in them takes minutes.
    LARGE_VERDICTS, LARGE_PAD = 40_000, 870

    def test_a_pass_record_of_35_mb_is_read(self, tmp_path: Path) -> None:
        """A 35 MB pass record of 40,000 verdicts (DuckDB refused the whole log past 32 MiB) is
        one row of records and one row of decisions per verdict."""
        pytest.importorskip("duckdb")
        path = self.log_with_pass_of(
            tmp_path / "audit.jsonl", self.LARGE_VERDICTS, pad=self.LARGE_PAD
        )
        assert len(path.read_bytes().splitlines()[-1]) > 35_000_000 > 2 * 16 * 1024 * 1024
        statement = (
            "SELECT (SELECT count(*) FROM records) AS records,"
            " (SELECT count(*) FROM decisions) AS decisions,"
            " (SELECT max(segment_id) FROM decisions) AS last"
        )
        code, out, err = cli("audit", "sql", "--format", "json", statement, str(path))
        assert (code, err) == (0, "")
        assert json.loads(out) == {
            "records": 2,
            "decisions": self.LARGE_VERDICTS,
            "last": f"{self.LARGE_VERDICTS - 1:06d}-" + "x" * self.LARGE_PAD,
        }

    def test_duckdb_alone_refuses_that_record(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The record of the test above is one DuckDB's default object size refuses: without the
        longest line measured first, the whole log is an error."""
        pytest.importorskip("duckdb")
        from prunewarden.review import _sql  # noqa: PLC0415 - the module whose measure is undone

        monkeypatch.setattr(_sql, "_object_bytes", lambda _files: _sql._DEFAULT_OBJECT_BYTES)
        path = self.log_with_pass_of(
            tmp_path / "audit.jsonl", self.LARGE_VERDICTS, pad=self.LARGE_PAD
        )
        code, out, err = cli("audit", "sql", "SELECT count(*) FROM records", str(path))
        assert (code, out) == (2, "")
        assert "maximum_object_size" in err

    @pytest.mark.parametrize("version", [2, 3])
    def test_the_decisions_of_a_pass_are_read_once(self, tmp_path: Path, version: int) -> None:
        """Each verdict of a 3,000-verdict pass is a row of its own, in order, without the pass
        record being copied for every row (which took minutes and filled a disk at 20,000)."""
        pytest.importorskip("duckdb")
        path = self.log_with_pass_of(tmp_path / "audit.jsonl", 3_000, version)
        statement = "SELECT decision_id, segment_id FROM decisions ORDER BY decision_id"
        code, out, err = cli("audit", "sql", "--format", "json", statement, str(path))
        assert (code, err) == (0, "")
        rows = [json.loads(line) for line in out.splitlines()]
        pass_id = json.loads(path.read_bytes().splitlines()[-1])["pass_id"]
        assert len(rows) == 3_000
        assert {row["decision_id"]: row["segment_id"][:6] for row in rows} == {
            f"{pass_id}-{i}": f"{i:06d}" for i in range(3_000)
        }

    def test_places_outcomes_and_dependencies_are_those_decision_rows_reads(
        self, tmp_path: Path
    ) -> None:
        """The view expands a version 3 record's columns once: each segment's place (among plan
        verdicts whose indices come in any order, repeated or past the pass), outcome, reasons
        and dependencies (keyed by column; a key not spelled as an index names none) are those
        decision_rows reads from the record."""
        pytest.importorskip("duckdb")
        path = self.log_with_pass_of(tmp_path / "audit.jsonl", 9, pad=0)
        *before, last = path.read_bytes().splitlines(keepends=True)
        record = {k: v for k, v in json.loads(last).items() if k not in ("hash", "prev_hash")}
        depends = 1 << record["code_actions"].index("resolve_dependencies_first")
        verdict = {"check": "staleness", "outcome": "allow", "enforced": True, "codes": ["fresh"]}
        record.update(
            reasons=[1, depends | 2, 1, depends, 1, 1, 2, 1, depends],
            allowed="101011101",
            dependencies={"1": ["a", "b"], "3": ["c"], "08": ["not-8"], "x": ["y"], "8": ["d"]},
            verdict_indices=[7, 2, 2, 40, 0],
            verdicts=[{**verdict, "actions": []}] * 5,
        )
        line, _ = seal(record, json.loads(before[-1])["hash"], None)
        path.write_bytes(b"".join([*before, line]))
        statement = (
            "SELECT decision_id, outcome, reason_codes, actions::VARCHAR AS actions FROM decisions"
        )
        code, out, err = cli("audit", "sql", "--format", "json", statement, str(path))
        assert (code, err) == (0, "")
        found = sorted(list(json.loads(row).values()) for row in out.splitlines())
        expected = sorted(
            [
                row["decision_id"],
                row["outcome"],
                [reason["code"] for reason in row["reasons"]],
                json.dumps(row["actions"], separators=(",", ":")),
            ]
            for row in decision_rows(record)
        )
        assert found == expected
        places = sorted(int(row[0].rsplit("-", 1)[1]) for row in found)
        assert places == [0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 40]

    def test_a_line_longer_than_any_record_is_refused_with_its_place(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A line past MAX_SQL_LINE_BYTES is not a record: the command names file and line
        (exit 2) rather than ask DuckDB for that much memory."""
        pytest.importorskip("duckdb")
        from prunewarden.review import _sql  # noqa: PLC0415 - the module whose limit is lowered

        monkeypatch.setattr(_sql, "MAX_SQL_LINE_BYTES", 2000)
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            Engine.default(audit=audit).authorize_evictions([item("seg-0")])
        path.write_bytes(path.read_bytes() + b"x" * 3000 + b"\n")
        code, out, err = cli("audit", "sql", "SELECT 1", str(path))
        assert (code, out) == (2, "")
        assert err.startswith(f"audit sql: {path}:3: a line of 3000 bytes, longer than any record")


class TestVersionOneLogs:
    @pytest.fixture
    def v1_log(self, tmp_path: Path) -> Path:
        """A log as record_version 1 wrote it: Python's sorted-keys ASCII JSON, v1 digests."""
        engine = Engine.default(logger=None)
        activation = {**policy_activated_record(engine.policy), "record_version": 1}
        activation["policy"] = {**activation["policy"], "digest": _v1_digest(activation)}
        decision = {
            "record_version": 1,
            "kind": "decision",
            "decision_id": "0" * 32,
            "ts": "2025-11-14T10:15:00.000000Z",
            "check": "eviction",
            "outcome": "allow",
            "enforced": True,
            "reasons": [{"code": "authorized", "message": "ok", "detail": {"score": 1.0}}],
            "actions": [],
            "subject": {
                "segment": {"id": "s41", "kind": "turn", "text_length": 0, "text_sha256": "0" * 64}
            },
            "session_id": None,
            "labels": {},
            "policy": activation["policy"],
            "engine_version": "0.1.0",
            "input_digest": "sha256:" + "1" * 64,
        }
        path = tmp_path / "v1.jsonl"
        first, last = _v1_sealed(activation, GENESIS)
        second, _ = _v1_sealed(decision, last)
        path.write_bytes(first + second)
        assert b'"score":1.0' in second  # version 1's own spelling
        return path

    def test_a_writer_does_not_chain_after_a_v1_record(self, v1_log: Path) -> None:
        """An AuditLog opened on a record_version 1 log appends nothing: the decision is
        refused (fail closed) and the log is as it was."""
        before = v1_log.read_bytes()
        with AuditLog(v1_log) as audit:
            (decision,) = Engine.default(audit=audit).authorize_evictions([item("s1")])
        assert decision.refused
        assert "audit_unavailable" in decision.codes
        assert v1_log.read_bytes() == before

    def test_verify_refuses_a_v1_log_naming_the_version(self, v1_log: Path) -> None:
        """audit verify fails a record_version 1 log (exit 5) at its first line, saying the
        version is no longer read and what to do."""
        code, out, err = cli("audit", "verify", str(v1_log))
        assert code == 5
        assert out == f"{v1_log}: FAILED at line 1 (0 records before it verify)\n"
        assert f"{v1_log}:1: record_version 1 was written before the first release" in err
        assert "start a new one" in err

    @pytest.mark.parametrize(
        ("command", "line"), [(("query", "--subject", "s41"), 2), (("report",), 1)]
    )
    def test_readers_refuse_a_v1_log_in_one_line(
        self, v1_log: Path, command: tuple[str, ...], line: int
    ) -> None:
        """audit query and report stop at the first record_version 1 record they read
        (exit 2), one line naming the file, the line and the version."""
        code, out, err = cli("audit", *command, str(v1_log))
        assert code == 2
        assert "s41" not in out
        assert err.splitlines() == [
            (
                f"{v1_log}:{line}: record_version 1 was written before the first release and is no "
                "longer read (only 2 and 3): keep the log as it is, and start a new one"
            )
        ]


def _v1_sealed(record: dict[str, Any], prev_hash: str) -> tuple[bytes, str]:
    """A line as record_version 1 sealed it: over Python's sorted-keys ASCII JSON."""
    body = canonical_record({**record, "prev_hash": prev_hash})
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return body[:-1] + b',"hash":"' + digest.encode() + b'"}\n', digest


def _v1_digest(record: dict[str, Any]) -> str:
    text = json.dumps(record["document"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
class TestOtherLanguages:
    def test_node_verifies_a_log_the_engine_wrote(self, log: tuple[Path, Any]) -> None:
        """Node recomputes every hash of a log AuditLog wrote, passes and activations alike."""
        path, _ = log
        node = shutil.which("node")
        assert node is not None
        result = subprocess.run(
            [node, str(VERIFIER), "chain", str(path)], capture_output=True, text=True, check=False
        )
        assert (result.returncode, result.stdout.strip()) == (0, "ok 3 records")

    def test_node_finds_a_changed_v3_pass(self, log: tuple[Path, Any], tmp_path: Path) -> None:
        """A version 3 pass record whose reasons were changed fails Node's check, as audit
        verify's."""
        path, _ = log
        lines = path.read_bytes().splitlines(keepends=True)
        assert json.loads(lines[1])["record_version"] == 3
        forged = tmp_path / "forged.jsonl"
        forged.write_bytes(
            b"".join([lines[0], lines[1].replace(b'"reasons":[1,', b'"reasons":[8,'), lines[2]])
        )
        node = shutil.which("node")
        assert node is not None
        result = subprocess.run(
            [node, str(VERIFIER), "chain", str(forged)], capture_output=True, text=True, check=False
        )
        assert (result.returncode, result.stdout.strip()) == (
            1,
            "FAIL line 2: hash does not match the record",
        )
        assert cli("audit", "verify", str(forged))[0] != 0

    def test_node_recomputes_the_activated_policy_digest(
        self, log: tuple[Path, Any], tmp_path: Path
    ) -> None:
        """The digest of the policy_activated document, recomputed in Node, is its digest."""
        path, _ = log
        activation = records(path)[0]
        document = tmp_path / "policy.json"
        document.write_bytes(encode_canonical(activation["document"]))
        node = shutil.which("node")
        assert node is not None
        result = subprocess.run(
            [node, str(VERIFIER), "digest", str(document)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.stdout.strip() == activation["policy"]["digest"]


class TestBatches:
    def test_a_batch_is_one_write_with_each_record_serialized_once(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """write_batch: one lock, one write call, one canonical form per record; the chain
        verifies."""
        path = tmp_path / "audit.jsonl"
        writes: list[int] = []
        encoded: list[object] = []
        real_write = os.write
        real_encode = encode_canonical

        def counted_write(fd: int, data: Any) -> int:
            writes.append(len(data))
            return real_write(fd, data)

        def counted_encode(value: Any) -> bytes:
            encoded.append(value)
            return real_encode(value)

        monkeypatch.setattr(os, "write", counted_write)
        monkeypatch.setattr("prunewarden.audit._chain.encode_canonical", counted_encode)
        batch = [policy_reload_failed_record(f"p{i}.yaml", ["bad"], None) for i in range(3)]
        with AuditLog(path) as audit:
            audit.write_batch(batch)
        assert (len(writes), len(encoded)) == (1, 3)
        assert [r["error"]["path"] for r in records(path)] == ["p0.yaml", "p1.yaml", "p2.yaml"]
        assert cli("audit", "verify", str(path))[0] == 0


class TestHooks:
    def test_hooks_receive_each_decision_with_the_pass_record(self) -> None:
        """A decision hook sees every decision of a pass, each with the one pass record."""
        seen: list[tuple[Any, Any]] = []
        engine = Engine.default(on_decision=lambda d, r: seen.append((d, r)))
        decisions = engine.authorize_evictions([item("a"), item("b", None)])
        assert [d for d, _ in seen] == list(decisions)
        (record,) = {id(r): r for _, r in seen}.values()
        assert record["kind"] == "pass"
        assert record["segments"] == ["a", "b"]

    def test_no_sink_no_record(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without a sink or a hook, a pass builds no record (and digests nothing)."""
        monkeypatch.setattr("prunewarden.planner._log.input_digest", _refuse_to_digest)
        decisions = Engine.default().authorize_evictions([item("a")])
        assert decisions[0].codes == ("authorized",)


def _refuse_to_digest(_: Any) -> str:
    msg = "no record should be built"
    raise AssertionError(msg)


class TestColumnsRecordsReadAsTheySay:
    def pass_record(self, stream: io.StringIO) -> dict[str, Any]:
        (record,) = [
            r for r in map(json.loads, stream.getvalue().splitlines()) if r["kind"] == "pass"
        ]
        assert record["record_version"] == 3
        return dict(record)

    def test_a_pass_over_columns_logs_its_input_when_asked(self) -> None:
        """AuditLog(inputs=True): the version 3 record of a pass holds the pass document."""
        stream = io.StringIO()
        items = [item("a"), item("b", None)]
        Engine.default(audit=AuditLog(stream, inputs=True)).authorize_pass(items)
        record = self.pass_record(stream)
        assert record["input"] == {"evictions": items, "eviction_candidates": ["a", "b"]}
        assert record["input_erased"] == []

    def test_columns_cut_short_read_without_what_is_missing(self) -> None:
        """A version 3 record whose reasons or code actions stop short of its segments and
        codes (none the engine writes, one edited by hand): each segment is still read, one
        without a mask with no reason, a code without an action with none."""
        stream = io.StringIO()
        Engine.default(audit=AuditLog(stream)).authorize_pass([item("a"), item("b", None)])
        record = self.pass_record(stream)
        assert record["reasons"] == [1, 8]  # authorized; perturbation_missing
        rows = decision_rows({**record, "reasons": record["reasons"][:1]})
        assert [[r["code"] for r in row["reasons"]] for row in rows] == [["authorized"], []]
        assert [row["outcome"] for row in rows] == ["allow", "deny"]
        rows = decision_rows({**record, "code_actions": record["code_actions"][:3]})
        assert [row["actions"] for row in rows] == [[], []]
        assert [[r["code"] for r in row["reasons"]] for row in rows] == [
            ["authorized"],
            ["perturbation_missing"],
        ]


def shadowed_engine(stream: io.StringIO, **log: Any) -> Engine:
    """The default policy, beside a candidate whose score range ends at 0.5."""
    candidate = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "narrow", "version": "1.0.0"},
        "spec": {"scores": {"min": 0, "max": 0.5}},
    }
    shadow = parse_policy(json.dumps(candidate), "<narrow>")
    return Engine(Engine.default().policy, audit=AuditLog(stream, **log), shadow=shadow)


def high(segment_id: str) -> dict[str, Any]:
    """An item scored 0.9: outside the candidate's score range."""
    return {**item(segment_id), "score": 0.9, "perturbed_score": 0.9}


def pass_of(stream: io.StringIO) -> dict[str, Any]:
    (record,) = [r for r in map(json.loads, stream.getvalue().splitlines()) if r["kind"] == "pass"]
    return dict(record)


class TestShadowedPassRecords:
    def test_the_candidates_verdicts_stand_beside_the_pass(self) -> None:
        """Beside each verdict, what the candidate decided (outcome, enforced, codes, whether
        it agrees), or why it could not decide (its error)."""
        stream = io.StringIO()
        shadowed_engine(stream).authorize_pass([item("a"), item("b", None), high("c")])
        record = pass_of(stream)
        assert record["record_version"] == 2
        assert record["shadow"]["policy"]["name"] == "narrow"
        assert record["shadow"]["verdicts"] == [
            {"outcome": "allow", "enforced": True, "codes": ["authorized"], "agrees": True},
            {
                "outcome": "deny",
                "enforced": True,
                "codes": ["perturbation_missing"],
                "agrees": True,
            },
            {
                "error": "the candidate refuses the input: <input>: $.perturbed_score: 0.9 is "
                "outside the policy's score range [0.0, 0.5]",
                "agrees": False,
            },
        ]

    def test_a_decision_the_candidate_did_not_decide_is_named_so(self) -> None:
        """pass_record of decisions of which one has no candidate's result: its shadow
        verdict says so; without the candidate's policy such a record is not made."""
        decisions = list(shadowed_engine(io.StringIO()).authorize_evictions([item("a"), item("b")]))
        decisions[1] = replace_value(decisions[1], shadow=None)
        fields: dict[str, Any] = {
            "input_digest": "0" * 64,
            "policy": Engine.default().policy,
            "session_id": None,
            "labels": {},
        }
        candidate = shadowed_engine(io.StringIO()).shadow
        assert candidate is not None
        record = pass_record(
            "evictions", decisions, [None, None], **fields, shadow_policy=candidate.policy
        )
        assert record["shadow"]["verdicts"][1] == {
            "error": "not decided by the candidate",
            "agrees": False,
        }
        with pytest.raises(ValueError, match="logged with the shadow's policy"):
            pass_record("evictions", decisions, [None, None], **fields)

    def test_a_pass_decided_one_by_one_logs_its_input_when_asked(self) -> None:
        """AuditLog(inputs=True): the version 2 record of a pass holds the pass document."""
        stream = io.StringIO()
        items = [item("a"), item("b", None)]
        shadowed_engine(stream, inputs=True).authorize_pass(items)
        record = pass_of(stream)
        assert record["record_version"] == 2
        assert record["input"] == {"evictions": items, "eviction_candidates": ["a", "b"]}


def bound(segment_id: str, score: float) -> dict[str, Any]:
    text = f"text of {segment_id}"
    return {
        "id": segment_id,
        "kind": "turn",
        "text": text,
        "tokens": 50,
        "score": score,
        "perturbed_score": score,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


class TestPlanColumnsRead:
    def test_a_plan_without_its_verdicts_places_reads_its_columns(self) -> None:
        """A version 3 plan record missing verdict_indices (none the engine writes): its
        columns are read, its verdicts, which have no place, are left out."""
        stream = io.StringIO()
        window = [bound(f"s{i}", 0.1 + i / 10) for i in range(4)]
        Engine.default(audit=AuditLog(stream)).plan({"segments": window, "keep_top_k": 1})
        record = pass_of(stream)
        assert (record["record_version"], record["verdict_indices"]) == (3, [0])
        whole = decision_rows(record)
        assert [row["index"] for row in whole] == list(range(len(record["segments"]) + 1))
        cut = {k: v for k, v in record.items() if k != "verdict_indices"}
        rows = decision_rows(cut)
        assert [row["check"] for row in rows] == ["eviction"] * len(record["segments"])
        assert [row["subject"] for row in rows] == [
            row["subject"] for row in whole if row["check"] == "eviction"
        ]


class TestVerdictEntries:
    def test_a_collapse_verdict_names_the_last_cycle_of_its_history(self) -> None:
        """The compact entry of a collapse decision names the cycle it judged: the last of
        the history it was given."""
        decision = Engine.default().authorize_evictions([item("a")])[0]
        history = tuple(Snapshot(cycle, {"task": 0.5}, ("task",)) for cycle in (3, 4, 7))
        entry = verdict_entry(decision, CollapseRequest(history, None))
        assert entry["cycle"] == 7
        assert "segment" not in entry
        assert "cycle" not in verdict_entry(decision, CollapseRequest((), None))


class TestPlanVerdictsRead:
    def test_verdicts_without_a_usable_place_are_left_out(self) -> None:
        """A version 3 plan record (edited) with more verdicts than places, or a place that
        is no number, or a verdict that is no object: its columns are read, and of its
        verdicts those with a place and a body."""
        stream = io.StringIO()
        window = [bound(f"s{i}", 0.1 + i / 10) for i in range(4)]
        Engine.default(audit=AuditLog(stream)).plan({"segments": window, "keep_top_k": 1})
        record = pass_of(stream)
        (verdict,) = record["verdicts"]
        columns = len(record["segments"])
        longer = decision_rows({**record, "verdicts": [verdict, verdict]})
        assert [row["index"] for row in longer] == list(range(columns + 1))
        for places, verdicts in (["x"], [verdict]), ([0], ["not an object"]):
            rows = decision_rows({**record, "verdict_indices": places, "verdicts": verdicts})
            assert [row["check"] for row in rows] == ["eviction"] * columns
