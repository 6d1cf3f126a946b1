"""Reviewing the log: query, report, show-policy, sql, and the CLI options that write it.

The scenario answers the auditor's question "Why was segment s41 evicted on 14 November, and
under which thresholds?" from the log alone.
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden import AuditLog, Decision, Engine, parse_policy
from prunewarden import decision as decision_module
from prunewarden._json import canonical_digest
from prunewarden.audit import EPISODE_COLUMNS, RecordFilter, Skipped, halt_episodes, parse_time
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "inputs"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def policy_yaml(version: str, stability_delta: float) -> str:
    return (
        "apiVersion: prunewarden/v1\nkind: Policy\n"
        f"metadata: {{name: prod-eu, version: {version}}}\n"
        f"spec:\n  eviction: {{stability_delta: {stability_delta}}}\n"
    )


def eviction(segment_id: str, score: float, perturbed: float, kind: str = "turn") -> dict[str, Any]:
    return {
        "check": "eviction",
        "segment": {"id": segment_id, "kind": kind, "tombstone_written": True, "text": "..."},
        "score": score,
        "perturbed_score": perturbed,
        "eviction_candidates": [segment_id],
    }


@dataclass(frozen=True)
class Made:
    """A decision the scenario made, with what the filters look at."""

    decision: Decision
    subject: str
    session: str


class _Clock:
    """Stands in for ``datetime`` in prunewarden.decision: decisions are stamped at ``now``."""

    now_value = datetime(2025, 11, 13, 8, 0, tzinfo=UTC)

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # noqa: ARG003 - the signature of datetime.now
        return cls.now_value


@dataclass
class Scenario:
    files: list[Path]
    made: list[Made]

    @property
    def args(self) -> list[str]:
        return [str(p) for p in self.files]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """Two days of one agent fleet. On 13 November prod-eu@1.3.0 (stability_delta 0.25) refuses
    to evict s41, whose score moved 0.31 under perturbation; on 14 November at 09:00 prod-eu@1.4.0
    raises stability_delta to 0.4 and at 10:15 s41 is evicted. The log rotates on the way."""
    directory = tmp_path_factory.mktemp("scenario")
    log = directory / "audit.jsonl"
    v13 = parse_policy(policy_yaml("1.3.0", 0.25), "policies/prod-eu.yaml")
    v14 = parse_policy(policy_yaml("1.4.0", 0.4), "policies/prod-eu.yaml")
    plan: list[tuple[datetime, Any, str, dict[str, Any], str]] = []
    for day, policy in ((13, v13), (14, v14)):
        for hour in range(8, 18):
            moment = datetime(2025, 11, day, hour, 15, tzinfo=UTC)
            plan.append(
                (moment, policy, f"t{day}-{hour}", eviction(f"t{day}-{hour}", 0.1, 0.1), "a1")
            )
            plan.append((moment, policy, "c7", eviction("c7", 0.05, 0.05, "constraint"), "a2"))
    plan.append(
        (datetime(2025, 11, 13, 16, 40, tzinfo=UTC), v13, "s41", eviction("s41", 0.12, 0.43), "a1")
    )
    plan.append(
        (datetime(2025, 11, 14, 10, 15, tzinfo=UTC), v14, "s41", eviction("s41", 0.12, 0.43), "a1")
    )
    plan.sort(key=lambda step: step[0])
    made: list[Made] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decision_module, "datetime", _Clock)
        with AuditLog(log, max_bytes=20_000) as audit:
            engines = {v13.digest: Engine(v13, audit=audit), v14.digest: Engine(v14, audit=audit)}
            for moment, policy, subject, document, session in plan:
                _Clock.now_value = moment
                decided = engines[policy.digest].evaluate(document, session_id=session)
                made.append(Made(decided, subject, session))
    files = [*sorted(directory.glob("audit.jsonl.*")), log]
    assert len(files) > 1
    return Scenario(files, made)


class TestAuditorsQuestion:
    """Why was segment s41 evicted on 14 November, and under which thresholds?"""

    def test_first_the_log_verifies(self, scenario: Scenario) -> None:
        """The answer only counts if the log is intact."""
        code, out, _ = cli("audit", "verify", *scenario.args)
        assert code == 0
        assert out.count(": ok, ") == len(scenario.files)

    def test_query_finds_the_eviction(self, scenario: Scenario) -> None:
        """One allowed decision about s41 on that day, authorized under prod-eu@1.4.0."""
        code, out, _ = cli(
            "audit", "query", *scenario.args, "--subject", "s41",
            "--since", "2025-11-14", "--until", "2025-11-15", "--format", "json",
        )  # fmt: skip
        assert code == 0
        (record,) = [json.loads(line) for line in out.splitlines()]
        expected = next(
            m.decision
            for m in scenario.made
            if m.subject == "s41" and m.decision.outcome == "allow"
        )
        assert record["decision_id"] == expected.decision_id
        assert record["ts"] == "2025-11-14T10:15:00.000000Z"
        assert (record["outcome"], record["reasons"][0]["code"]) == ("allow", "authorized")
        assert (record["policy"]["name"], record["policy"]["version"]) == ("prod-eu", "1.4.0")

    def test_the_day_before_it_was_refused(self, scenario: Scenario) -> None:
        """Every decision about s41: denied on the 13th for an unstable score, then allowed."""
        code, out, _ = cli("audit", "query", *scenario.args, "--subject", "s41")
        assert code == 0
        rows = out.splitlines()[1:]
        assert len(rows) == 2
        for row, words in zip(
            rows,
            [("deny", "unstable_score", "prod-eu@1.3.0"), ("allow", "authorized", "prod-eu@1.4.0")],
            strict=True,
        ):
            assert all(word in row.split() for word in words)

    def test_show_policy_prints_the_thresholds(self, scenario: Scenario) -> None:
        """The full policy behind the decision: stability_delta 0.4, loadable as the same policy."""
        allowed = next(
            m.decision
            for m in scenario.made
            if m.subject == "s41" and m.decision.outcome == "allow"
        )
        code, out, _ = cli("audit", "show-policy", allowed.decision_id, *scenario.args)
        assert code == 0
        assert out.startswith(f"# policy prod-eu@1.4.0 {allowed.policy.digest}\n")
        assert f"# authorized decision {allowed.decision_id} (eviction allow)" in out
        document = yaml.safe_load(out)
        assert document["spec"]["eviction"]["stability_delta"] == 0.4
        assert parse_policy(out, "<shown>").digest == allowed.policy.digest

    def test_report_counts_per_policy_version(self, scenario: Scenario) -> None:
        """Counts per policy version x check x outcome x reason, with first and last seen."""
        code, out, _ = cli("audit", "report", *scenario.args, "--format", "json")
        assert code == 0
        rows = [json.loads(line) for line in out.splitlines()]
        expected: dict[tuple[str, str, str], list[str]] = {}
        key: tuple[str, str, str]
        for m in scenario.made:
            key = (m.decision.policy.version, m.decision.outcome, m.decision.codes[0])
            expected.setdefault(key, []).append(m.decision.evaluated_at)
        got = {(r["policy_version"], r["outcome"], r["reason"]): r for r in rows}
        assert set(got) == set(expected)
        for key, times in expected.items():
            assert got[key]["count"] == len(times)
            assert (got[key]["first_seen"], got[key]["last_seen"]) == (min(times), max(times))
        assert got[("1.3.0", "deny", "unstable_score")]["count"] == 1

    def test_sql_answers_in_one_statement(self, scenario: Scenario) -> None:
        """decisions joined to policies gives the reason and the thresholds."""
        statement = (
            "SELECT d.ts, d.outcome, d.reason, d.policy_version, "
            "p.document->'spec'->'eviction'->>'stability_delta' AS stability_delta "
            "FROM decisions d JOIN policies p USING (policy_digest) "
            "WHERE d.segment_id = 's41' AND d.ts::DATE = DATE '2025-11-14'"
        )
        code, out, err = cli("audit", "sql", statement, *scenario.args, "--format", "json")
        assert (code, err) == (0, "")
        (row,) = [json.loads(line) for line in out.splitlines()]
        assert row == {
            "ts": "2025-11-14T10:15:00.000000Z",
            "outcome": "allow",
            "reason": "authorized",
            "policy_version": "1.4.0",
            "stability_delta": "0.4",
        }


class TestQuery:
    @pytest.mark.parametrize(
        ("options", "keep"),
        [
            ([], lambda _: True),
            (["--policy-version", "1.3.0"], lambda m: m.decision.policy.version == "1.3.0"),
            (["--outcome", "deny"], lambda m: m.decision.outcome == "deny"),
            (["--reason", "pinned"], lambda m: "pinned" in m.decision.codes),
            (["--session", "a2"], lambda m: m.session == "a2"),
            (["--check", "eviction", "--outcome", "allow"], lambda m: not m.decision.refused),
            (["--check", "collapse"], lambda _: False),
            (
                ["--subject", "c7", "--since", "2025-11-14T12:00:00+01:00"],
                lambda m: m.subject == "c7" and m.decision.evaluated_at >= "2025-11-14T11:00",
            ),
            (
                ["--until", "2025-11-13T12:00:00Z"],
                lambda m: m.decision.evaluated_at < "2025-11-13T12:00",
            ),
            (["--policy", "nobody"], lambda _: False),
        ],
        ids=lambda value: " ".join(value) if isinstance(value, list) else "",
    )
    def test_filters(self, scenario: Scenario, options: list[str], keep: Any) -> None:
        """Each filter keeps exactly the decisions it describes, in log order."""
        code, out, _ = cli("audit", "query", *scenario.args, *options, "--format", "json")
        assert code == 0
        got = [json.loads(line)["decision_id"] for line in out.splitlines()]
        assert got == [m.decision.decision_id for m in scenario.made if keep(m)]

    def test_digest_and_decision_filters(self, scenario: Scenario) -> None:
        """--digest and --decision select by exact policy digest and decision id."""
        first = scenario.made[0].decision
        code, out, _ = cli("audit", "query", *scenario.args, "--decision", first.decision_id)
        assert (code, len(out.splitlines())) == (0, 2)
        code, out, _ = cli(
            "audit", "query", *scenario.args, "--digest", first.policy.digest, "--format", "json"
        )
        same = [m for m in scenario.made if m.decision.policy.digest == first.policy.digest]
        assert len(out.splitlines()) == len(same)

    def test_json_output_is_the_records_as_written(self, scenario: Scenario) -> None:
        """--format json prints each matching line byte for byte, so hashes still check."""
        _, out, _ = cli("audit", "query", *scenario.args, "--limit", "3", "--format", "json")
        written = {line for p in scenario.files for line in p.read_text().splitlines()}
        lines = out.splitlines()
        assert len(lines) == 3
        assert all(line in written for line in lines)

    def test_table_output(self, scenario: Scenario) -> None:
        """The table has a header and one row per decision."""
        code, out, _ = cli("audit", "query", *scenario.args, "--limit", "2")
        assert code == 0
        header, *rows = out.splitlines()
        assert header.split() == [
            "ts", "decision_id", "check", "outcome", "enforced", "policy", "session_id",
            "reasons", "subject",
        ]  # fmt: skip
        assert len(rows) == 2
        assert rows[0].startswith("2025-11-13T08:15:00.000000Z  ")

    def test_lines_that_are_not_records_are_skipped_and_counted(self, tmp_path: Path) -> None:
        """A torn line does not stop a query; it is reported on stderr."""
        log = tmp_path / "audit.jsonl"
        with AuditLog(log) as audit:
            Engine.default(audit=audit).evaluate(
                json.loads((EXAMPLES / "eviction-healthy.json").read_text())
            )
        log.write_text(log.read_text() + '{"kind":"decision","check":"evicti\n')
        code, out, err = cli("audit", "query", str(log), "--format", "json")
        assert code == 0
        assert len(out.splitlines()) == 1
        assert (
            err
            == f"{log}: 1 line(s) that are not records skipped (see: prunewarden audit verify)\n"
        )

    @pytest.mark.parametrize("bad", ["yesterday", "2025-13-01", "14/11/2025", "7y", "7 d"])
    def test_bad_times_are_usage_errors(self, scenario: Scenario, bad: str) -> None:
        """--since and --until take dates, RFC 3339 times or times ago (7d)."""
        code, out, err = cli("audit", "query", *scenario.args, "--since", bad)
        assert (code, out) == (2, "")
        assert "is not a date, an RFC 3339 time or a time ago" in err

    def test_missing_files_and_no_files(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An unreadable log, or none at all, is a usage error."""
        code, _, err = cli("audit", "query", str(tmp_path / "absent.jsonl"))
        assert code == 2
        assert err.startswith(f"cannot read {tmp_path / 'absent.jsonl'}")
        monkeypatch.delenv("PRUNEWARDEN_AUDIT_LOG", raising=False)
        code, _, err = cli("audit", "report")
        assert code == 2
        assert "no audit log given" in err


class TestShowPolicy:
    def test_json_format_prints_the_canonical_document(self, scenario: Scenario) -> None:
        """--format json prints the document whose digest the decision names."""
        first = scenario.made[0].decision
        code, out, _ = cli(
            "audit", "show-policy", first.decision_id, *scenario.args, "--format", "json"
        )
        assert code == 0
        assert canonical_digest(json.loads(out)) == first.policy.digest

    def test_unknown_decision(self, scenario: Scenario) -> None:
        """An id that is not in the logs is a usage error."""
        code, out, err = cli("audit", "show-policy", "0" * 32, *scenario.args)
        assert (code, out) == (2, "")
        assert err == f"no decision {'0' * 32} in the given logs\n"

    def test_a_decision_without_its_activation_is_refused(self, scenario: Scenario) -> None:
        """Given only a file whose activation was cut away, show-policy refuses to guess."""
        path = scenario.files[-1]
        last = json.loads(path.read_text().splitlines()[-1])
        lines = [
            line
            for line in path.read_text().splitlines()
            if '"kind":"policy_activated"' not in line
        ]
        stripped = path.parent / "stripped.jsonl"
        stripped.write_text("\n".join(lines) + "\n")
        code, _, err = cli("audit", "show-policy", last["decision_id"], str(stripped))
        assert code == 2
        assert "which no earlier record of its file activates" in err


class TestSql:
    def test_views_and_table_output(self, scenario: Scenario) -> None:
        """records, decisions and policies are queryable; the table has a header."""
        statement = (
            "SELECT policy_version, count(*) AS n FROM decisions "
            "GROUP BY policy_version ORDER BY policy_version"
        )
        code, out, _ = cli("audit", "sql", statement, *scenario.args)
        assert code == 0
        lines = out.splitlines()
        assert lines[0].split() == ["policy_version", "n"]
        counts = {
            v: sum(m.decision.policy.version == v for m in scenario.made)
            for v in ("1.3.0", "1.4.0")
        }
        assert lines[2].split() == ["1.3.0", str(counts["1.3.0"])]
        assert lines[3].split() == ["1.4.0", str(counts["1.4.0"])]
        _, out, _ = cli("audit", "sql", "SELECT count(*) AS n FROM policies", *scenario.args)
        assert out.splitlines()[2] == "2"
        code, out, _ = cli(
            "audit",
            "sql",
            "SELECT count(*) FROM records WHERE kind = 'log_rotated'",
            *scenario.args,
        )
        assert int(out.splitlines()[2]) == len(scenario.files) - 1

    @pytest.mark.parametrize("name", ["log*.jsonl", "log?.jsonl", "log[1].jsonl"])
    def test_file_names_are_not_patterns(
        self, scenario: Scenario, tmp_path: Path, name: str
    ) -> None:
        """A log named with *, ? or [ is read as that one file, not as a pattern matching
        its neighbours (log1.jsonl here)."""
        (tmp_path / name).write_bytes(scenario.files[-1].read_bytes())
        (tmp_path / "log1.jsonl").write_bytes(scenario.files[0].read_bytes())
        statement = "SELECT DISTINCT filename FROM records"
        code, out, err = cli("audit", "sql", "--format", "json", statement, str(tmp_path / name))
        assert (code, err) == (0, "")
        assert [row["filename"] for row in map(json.loads, out.splitlines())] == [
            str(tmp_path / name)
        ]

    def test_bad_sql_is_a_usage_error(self, scenario: Scenario) -> None:
        """DuckDB's message is passed on, without a traceback."""
        code, out, err = cli("audit", "sql", "SELEC nonsense", *scenario.args)
        assert (code, out) == (2, "")
        assert err.startswith("audit sql: Parser Error")

    def test_without_duckdb(self, scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the optional dependency the command says how to get it."""
        monkeypatch.setitem(sys.modules, "duckdb", None)
        code, _, err = cli("audit", "sql", "SELECT 1", *scenario.args)
        assert code == 2
        assert err == "audit sql needs duckdb: pip install 'prunewarden[sql]'\n"


class TestEvaluateOptions:
    def test_stdout_for_a_log_shipper(self) -> None:
        """--audit-log - puts only records on stdout and the decision on stderr."""
        code, out, err = cli(
            "evaluate", "--audit-log", "-", str(EXAMPLES / "eviction-healthy.json")
        )
        assert code == 0
        kinds = [json.loads(line)["kind"] for line in out.splitlines()]
        assert kinds == ["policy_activated", "decision"]
        assert json.loads(err)["outcome"] == "allow"

    def test_environment_chooses_the_log(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """$PRUNEWARDEN_AUDIT_LOG is used when --audit-log is not given; the flag wins."""
        from_env, from_flag = tmp_path / "env.jsonl", tmp_path / "flag.jsonl"
        monkeypatch.setenv("PRUNEWARDEN_AUDIT_LOG", str(from_env))
        example = str(EXAMPLES / "eviction-healthy.json")
        assert cli("evaluate", example)[2] == ""
        cli("evaluate", "--audit-log", str(from_flag), example)
        assert len(from_env.read_text().splitlines()) == 2
        assert len(from_flag.read_text().splitlines()) == 2

    def test_session_labels_and_inputs(self, tmp_path: Path) -> None:
        """--session-id, --label and --audit-inputs reach the record."""
        log = tmp_path / "audit.jsonl"
        code, _, _ = cli(
            "evaluate", "--audit-log", str(log), "--session-id", "run-7", "--label", "team=search",
            "--label", "env=prod", "--audit-inputs", str(EXAMPLES / "eviction-healthy.json"),
        )  # fmt: skip
        assert code == 0
        record = json.loads(log.read_text().splitlines()[-1])
        assert (record["session_id"], record["labels"]) == (
            "run-7",
            {"team": "search", "env": "prod"},
        )
        assert record["input"]["segment"]["id"] == "turn-30"

    def test_explicit_mask(self, tmp_path: Path) -> None:
        """--audit-mask replaces the default masks."""
        log = tmp_path / "audit.jsonl"
        cli(
            "evaluate",
            "--audit-log",
            str(log),
            "--audit-mask",
            "/segment/tokens",
            str(EXAMPLES / "eviction-healthy.json"),
        )
        record = json.loads(log.read_text().splitlines()[-1])
        assert record["input_erased"] == ["/segment/tokens"]

    def test_bad_label_is_a_usage_error(self) -> None:
        """A label without '=' is refused before anything is decided or logged."""
        code, out, err = cli("evaluate", "--label", "oops", str(EXAMPLES / "eviction-healthy.json"))
        assert (code, out) == (2, "")
        assert err == "<arguments>: $.labels: 'oops' is not KEY=VALUE\n"

    def test_keyed_records_from_the_environment(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With $PRUNEWARDEN_AUDIT_KEY set, evaluate seals records with it and verify checks."""
        monkeypatch.setenv("PRUNEWARDEN_AUDIT_KEY", "k3y-" + "0" * 28)
        log = tmp_path / "audit.jsonl"
        cli(
            "evaluate",
            "--audit-log",
            str(log),
            "--audit-fsync",
            "always",
            str(EXAMPLES / "eviction-healthy.json"),
        )
        assert json.loads(log.read_text().splitlines()[-1])["hash"].startswith("hmac-sha256:")
        assert cli("audit", "verify", str(log))[0] == 0
        monkeypatch.delenv("PRUNEWARDEN_AUDIT_KEY")
        assert cli("audit", "verify", str(log))[0] == 5

    def test_schema_command_prints_the_record_schema(self) -> None:
        """prunewarden schema audit-record prints the current format, audit-record.v3."""
        code, out, _ = cli("schema", "audit-record")
        assert code == 0
        assert json.loads(out)["title"] == "prunewarden audit record v3"


WIDE = {"task": 0.9, "a": 0.1, "b": 0.5, "c": 0.95}
FLAT = {"task": 0.5, "a": 0.5, "b": 0.52, "c": 0.54}


@pytest.fixture
def sessions_log(tmp_path: Path) -> Path:
    """Two labelled sessions: s1 halts in two episodes (two halts, a healthy cycle, one halt),
    s2 (another team) in one; the healthy cycles between them allow."""
    log = tmp_path / "audit.jsonl"
    with AuditLog(log) as audit:
        engine = Engine.default(audit=audit)
        one = engine.session("s1", labels={"team": "search", "env": "prod"})
        for scores in (WIDE, FLAT, FLAT, FLAT, WIDE, FLAT, FLAT):
            one.observe_cycle(scores, ["task"])
        two = engine.session("s2", labels={"team": "ads", "env": "prod"})
        for scores in (WIDE, FLAT, FLAT):
            two.observe_cycle(scores, ["task"])
    return log


class TestLabelsAndTimesAgo:
    def test_label_filters_query_and_report(self, sessions_log: Path) -> None:
        """--label K=V keeps the decisions recorded with that label; several must all match."""
        code, out, _ = cli(
            "audit", "query", str(sessions_log), "--format", "json", "--label", "team=ads"
        )
        assert code == 0
        assert {json.loads(line)["session_id"] for line in out.splitlines()} == {"s2"}
        _, out, _ = cli(
            "audit",
            "query",
            str(sessions_log),
            "--format",
            "json",
            "--label",
            "env=prod",
            "--label",
            "team=search",
        )
        assert {json.loads(line)["session_id"] for line in out.splitlines()} == {"s1"}
        _, out, _ = cli(
            "audit", "report", str(sessions_log), "--format", "json", "--label", "team=ads"
        )
        rows = [json.loads(line) for line in out.splitlines()]
        assert sum(row.get("count", 0) for row in rows) == 3
        _, out, _ = cli("audit", "query", str(sessions_log), "--label", "team=none")
        assert len(out.splitlines()) == 1  # the header only

    def test_a_label_must_be_key_value(self, sessions_log: Path) -> None:
        """--label without '=' is a usage error."""
        code, out, err = cli("audit", "query", str(sessions_log), "--label", "team")
        assert (code, out) == (2, "")
        assert err == "audit: --label 'team' is not KEY=VALUE\n"

    def test_since_a_time_ago(self, sessions_log: Path) -> None:
        """--since 7d keeps what was decided in the last seven days (all of this log), and
        --until 1d what is older than a day (none of it)."""
        _, out, _ = cli("audit", "query", str(sessions_log), "--format", "json", "--since", "7d")
        assert len(out.splitlines()) == 10
        _, out, _ = cli("audit", "query", str(sessions_log), "--format", "json", "--until", "1d")
        assert out == ""

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("7d", "2025-11-07T12:00:00.000000Z"),
            ("12h", "2025-11-14T00:00:00.000000Z"),
            ("30m", "2025-11-14T11:30:00.000000Z"),
            ("90s", "2025-11-14T11:58:30.000000Z"),
            ("2w", "2025-10-31T12:00:00.000000Z"),
        ],
    )
    def test_time_ago_units(self, text: str, expected: str) -> None:
        """s, m, h, d and w count back from now."""
        now = datetime(2025, 11, 14, 12, 0, tzinfo=UTC)
        assert parse_time(text, now) == expected


class TestHaltEpisodes:
    def test_report_counts_episodes_per_session(self, sessions_log: Path) -> None:
        """Consecutive halts of a session are one episode; an allowing cycle ends it."""
        code, out, _ = cli("audit", "report", str(sessions_log), "--format", "json")
        assert code == 0
        episodes = [row for row in map(json.loads, out.splitlines()) if "halt_episodes" in row]
        assert [
            (row["session_id"], row["halt_episodes"], row["halt_decisions"]) for row in episodes
        ] == [("s1", 2, 3), ("s2", 1, 1)]
        assert episodes[0]["first_halt"] < episodes[0]["last_halt"]

    def test_report_table_lists_episodes_after_the_counts(self, sessions_log: Path) -> None:
        """The table report adds the halts by session under the counts."""
        _, out, _ = cli("audit", "report", str(sessions_log), "--label", "team=search")
        tail = out.split("collapse halts by session (an episode: consecutive halts)\n")[1]
        header, _, row = tail.splitlines()
        assert header.split() == list(EPISODE_COLUMNS)
        assert row.split()[:3] == ["s1", "2", "3"]

    def test_no_halt_no_episodes(self, scenario: Scenario) -> None:
        """A log without halts reports no episode section."""
        _, out, _ = cli("audit", "report", *scenario.args)
        assert "halts by session" not in out
        assert halt_episodes(scenario.files, RecordFilter(), Skipped()) == []
