"""``prunewarden replay`` and ``prunewarden diff`` in-process; worker processes for real."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden import load_policy
from prunewarden.audit import decision_rows
from prunewarden.cli import _jobs
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "examples" / "traces").glob("*.jsonl"))
DEFAULT = str(ROOT / "policies" / "default.yaml")
LOOSE = str(ROOT / "examples" / "policies" / "loose-candidate.yaml")
CONTENT_PINS = str(ROOT / "examples" / "policies" / "content-pins.yaml")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def trace_named(name: str) -> str:
    return str(ROOT / "examples" / "traces" / name)


def without_ids(value: Any) -> Any:
    """A decision record without what differs between two runs: ids and times."""
    varying = {"decision_id", "evaluated_at", "collapse_decision", "refused_decision", "pass_id"}
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in varying}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


def write_policy(path: Path, **spec: Any) -> str:
    """A candidate policy stating only ``spec``."""
    metadata = {"name": "candidate", "version": "2.0.0"}
    document = {"apiVersion": "prunewarden/v1", "kind": "Policy", "metadata": metadata}
    path.write_text(yaml.safe_dump({**document, "spec": spec}))
    return str(path)


@pytest.fixture
def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress paced by a clock that never moves: only the closing line, however slow the
    machine (a replay taking over the 2-second tick printed a second line under load)."""
    monkeypatch.setattr(_jobs, "CLOCK", lambda: 0.0)


class SteppingClock:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class TestProgress:
    def test_a_log_gets_a_line_per_tick_and_one_at_the_end(self) -> None:
        """Off a terminal, a line every 2 seconds of the clock, then where it ended."""
        stream = io.StringIO()
        progress = _jobs.Progress(stream, "replay", [], on=True, clock=SteppingClock(1.0))
        for events in (1, 2, 3):
            progress.update(0, events, 0)
        progress.close()
        assert stream.getvalue().splitlines() == ["replay: 2 events", "replay: 3 events"]

    def test_a_still_clock_shows_only_the_end(self) -> None:
        """However many updates arrive, a clock that does not move shows only the end."""
        stream = io.StringIO()
        progress = _jobs.Progress(stream, "diff", [], on=True, clock=lambda: 0.0)
        for events in range(1, 500):
            progress.update(events % 2, events, 0)
        progress.close()
        assert stream.getvalue() == "diff: 997 events\n"


class TestReplayCommand:
    def test_summary_per_trace(self) -> None:
        """The table names each trace's session, counts by check, outcome and reason, and the
        first halt with its cycle."""
        code, out, err = cli("replay", *map(str, TRACES))
        assert (code, err) == (0, "")
        assert out.startswith("policy default@1.0.0 sha256:")
        block = out.split(trace_named("collapse-narrowing.jsonl"))[1].split("\n\n")[0]
        assert "session seed-000-narrowing: 29 events, 15 decisions" in block
        assert "halt    3  collapse_detected 3" in block
        assert "first halt: cycle 12 (line 24), collapse_detected" in block
        assert f"{len(TRACES)} traces, " in out.splitlines()[-1]

    def test_json_report(self) -> None:
        """--format json: the policy, one entry per trace, totals."""
        code, out, _ = cli("replay", "--format", "json", *map(str, TRACES))
        report = json.loads(out)
        assert code == 0
        assert report["policy"]["name"] == "default"
        by_trace = {Path(t["trace"]).name: t for t in report["traces"]}
        narrowing = by_trace["collapse-narrowing.jsonl"]
        assert narrowing["first_halt"]["cycle"] == 12
        assert narrowing["checks"]["collapse"]["halt"] == {
            "count": 3,
            "reasons": {"collapse_detected": 3},
        }
        assert by_trace["healthy-session.jsonl"]["outcomes"] == {
            "allow": 34,
            "deny": 0,
            "halt": 0,
        }
        assert report["totals"]["halted"] == 1

    def test_decisions_to_standard_output(self) -> None:
        """--decisions -: the records on stdout, the summary on stderr."""
        code, out, err = cli(
            "replay", "--decisions", "-", trace_named("eviction-utc-constraint.jsonl")
        )
        records = [json.loads(line) for line in out.splitlines()]
        assert code == 0
        assert [r["decision"]["outcome"] for r in records] == ["deny", "deny", "allow"]
        assert "session seed-001-utc-constraint" in err

    def test_decisions_and_audit_log_to_files(self, tmp_path: Path) -> None:
        """--decisions writes one line per decided event; --audit-log a chain that verifies,
        one record per decision (a pass: one record holding its decisions) after the policy's
        activation."""
        decisions, audit = tmp_path / "d.jsonl", tmp_path / "audit.jsonl"
        code, _, err = cli(
            "replay", "--decisions", str(decisions), "--audit-log", str(audit), *map(str, TRACES)
        )
        assert (code, err) == (0, "")
        lines = [json.loads(line) for line in decisions.read_text().splitlines()]
        decided = sum(len(r["plan"]["decisions"]) if "plan" in r else 1 for r in lines)
        assert cli("audit", "verify", str(audit))[0] == 0
        records = [json.loads(line) for line in audit.read_text().splitlines()]
        rows = [row for record in records for row in decision_rows(record)]
        assert len(rows) == decided
        assert [r["kind"] for r in records].count("policy_activated") == 1
        # The same decisions: each replayed decision is found in the log by its id.
        replayed = {
            d["decision_id"]
            for r in lines
            for d in (r["plan"]["decisions"] if "plan" in r else [r["decision"]])
        }
        assert replayed == {row["decision_id"] for row in rows}

    def test_a_malformed_trace_exits_two_and_the_others_still_run(self, tmp_path: Path) -> None:
        """The bad trace's problems are located on stderr; the other traces are summarized;
        what the bad trace decided before its bad line is kept."""
        bad = tmp_path / "bad.jsonl"
        good = Path(trace_named("eviction-buf-definition.jsonl")).read_text().splitlines()
        bad.write_text("\n".join([*good[:32], '{"type": "eviction", "segment": 3}', *good[32:]]))
        decisions = tmp_path / "d.jsonl"
        code, out, err = cli(
            "replay",
            "--decisions",
            str(decisions),
            str(bad),
            trace_named("healthy-homogeneous.jsonl"),
        )
        assert code == 2
        assert err.startswith(f"{bad}:33:")
        assert "$.segment: 3 is not of type 'object'" in err
        assert "STOPPED at line 33: malformed trace (see stderr)" in out
        assert "session healthy-homogeneous" in out
        traces = [json.loads(line)["trace"] for line in decisions.read_text().splitlines()]
        assert traces.count(str(bad)) == 1

    @pytest.mark.parametrize(
        ("argv", "code", "message"),
        [
            (["--jobs", "0"], 2, "'0' is not a positive whole number"),
            (["--policy", "nope.yaml"], 3, "nope.yaml: $: cannot read"),
            (["--decisions", "/nonexistent/d.jsonl"], 2, "cannot write /nonexistent/d.jsonl"),
            (["--audit-log", "/nonexistent/a.jsonl"], 2, "cannot open"),
        ],
        ids=["jobs", "policy", "decisions", "audit"],
    )
    def test_usage_errors(self, argv: list[str], code: int, message: str) -> None:
        """Bad options exit 2, a bad policy 3, each with one line saying why."""
        got, _, err = cli("replay", *argv, trace_named("healthy-homogeneous.jsonl"))
        assert got == code
        assert message in err

    def test_a_missing_trace(self, tmp_path: Path) -> None:
        """A trace that cannot be read is an input problem of that trace."""
        code, _, err = cli("replay", str(tmp_path / "none.jsonl"))
        assert code == 2
        assert err == f"{tmp_path / 'none.jsonl'}: $: cannot read: No such file or directory\n"

    @pytest.mark.usefixtures("still_clock")
    def test_progress_only_when_asked_or_on_a_terminal(self) -> None:
        """stderr that is not a terminal gets no progress unless --progress says so."""
        trace = trace_named("healthy-session.jsonl")
        assert cli("replay", trace)[2] == ""
        code, _, err = cli("replay", "--progress", trace)
        assert code == 0
        assert err == "replay: 26 events, 100%\n"

    def test_schema_trace(self) -> None:
        """prunewarden schema trace prints the trace line schema."""
        code, out, _ = cli("schema", "trace")
        assert code == 0
        assert json.loads(out)["$id"].endswith("/trace.v1.schema.json")


@pytest.mark.spawns
class TestParallel:
    @pytest.mark.parametrize("policy", [DEFAULT, CONTENT_PINS], ids=["default", "rules"])
    def test_jobs_give_the_same_decisions_as_serial(self, tmp_path: Path, policy: str) -> None:
        """--jobs 3 writes the same records, in the same order, and the same summary; a policy
        with custom rules reaches the workers intact."""
        serial, parallel = tmp_path / "serial.jsonl", tmp_path / "parallel.jsonl"
        options = ["--policy", policy, *map(str, TRACES)]
        one = cli("replay", "--decisions", str(serial), *options)
        three = cli("replay", "--jobs", "3", "--decisions", str(parallel), *options)
        assert one == three
        assert one[0] == 0
        records = [without_ids(json.loads(line)) for line in serial.read_text().splitlines()]
        assert records == [
            without_ids(json.loads(line)) for line in parallel.read_text().splitlines()
        ]
        assert len(records) > 40

    def test_workers_share_one_audit_log(self, tmp_path: Path) -> None:
        """Worker processes append to the same audit log; the chain verifies and holds every
        decision of every trace."""
        audit = tmp_path / "audit.jsonl"
        traces = [*map(str, TRACES), *map(str, TRACES)]
        code, out, _ = cli(
            "replay", "--jobs", "4", "--audit-log", str(audit), "--format", "json", *traces
        )
        assert code == 0
        decided = json.loads(out)["totals"]["decisions"]
        verified = cli("audit", "verify", str(audit))
        assert verified[0] == 0, verified
        records = [json.loads(line) for line in audit.read_text().splitlines()]
        sessions = [row["session_id"] for record in records for row in decision_rows(record)]
        assert len(sessions) == decided
        assert sessions.count("seed-001-buf-definition") == 4

    @pytest.mark.usefixtures("still_clock")
    def test_workers_report_progress(self) -> None:
        """With --jobs, the workers' progress reaches the parent's progress line, and the last
        line counts every event of every worker (however slowly the workers start, and however
        late their last report arrives)."""
        traces = [trace_named("healthy-session.jsonl"), trace_named("healthy-homogeneous.jsonl")]
        code, _, err = cli("replay", "--jobs", "2", "--progress", *traces)
        assert code == 0
        lines = err.splitlines()
        assert lines[-1] == "replay: 38 events, 100%"
        assert all(line.startswith("replay: ") for line in lines)

    def test_diff_jobs_match_serial(self) -> None:
        """diff --jobs 2 reports exactly what a serial diff does."""
        argv = [
            "diff",
            "--base",
            DEFAULT,
            "--candidate",
            LOOSE,
            "--format",
            "json",
            *map(str, TRACES),
        ]
        assert cli(*argv, "--jobs", "2") == cli(*argv)


class TestDiffCommand:
    def test_no_change_exits_zero(self, tmp_path: Path) -> None:
        """A candidate that decides the same (a reworded copy) changes nothing: exit 0."""
        same = write_policy(tmp_path / "same.yaml", collapse={"spread_floor": 0.08})
        code, out, err = cli("diff", "--base", DEFAULT, "--candidate", same, *map(str, TRACES))
        assert (code, err) == (0, "")
        assert out.splitlines()[-1].endswith("results compared: 0 changed")

    def test_the_loose_candidate_changes_decisions(self) -> None:
        """Every kind of change the loose candidate makes is grouped with its first example;
        exit 1."""
        code, out, err = cli("diff", "--base", DEFAULT, "--candidate", LOOSE, *map(str, TRACES))
        assert (code, err) == (1, "")
        narrowing = trace_named("collapse-narrowing.jsonl")
        assert "\n\ncollapse halt moved (collapse_detected): 1\n" in out
        assert "first halt at cycle 12 -> at cycle 14" in out
        assert "eviction deny -> allow (unstable_score): 1" in out
        assert "staleness deny -> allow (relevance_inflation): 2" in out
        assert "plan frozen -> planned (pruning_halted): 1" in out
        assert f"first: {narrowing}:24 (event 23, cycle 12)" in out
        blocks = out.split("\n\n")[1:]
        assert blocks[0].startswith("collapse halt moved")

    def test_json_lists_every_change(self) -> None:
        """The JSON report holds the groups and every changed pair, located by trace, event
        and line."""
        code, out, _ = cli(
            "diff", "--base", DEFAULT, "--candidate", LOOSE, "--format", "json", *map(str, TRACES)
        )
        report = json.loads(out)
        assert code == 1
        assert (
            len(report["changes"]) == report["changed"] == sum(g["count"] for g in report["groups"])
        )
        by_kind = {(c["check"], c["kind"]): c for c in report["changes"]}
        eviction = by_kind["eviction", "outcome"]
        assert (eviction["from"], eviction["to"], eviction["line"]) == ("deny", "allow", 44)
        assert eviction["base"]["reasons"] == ["unstable_score"]
        assert eviction["candidate"]["reasons"] == ["authorized"]
        halts = [t for t in report["traces"] if t["base_first_halt"]]
        assert [
            (t["base_first_halt"]["cycle"], t["candidate_first_halt"]["cycle"]) for t in halts
        ] == [(12, 14)]

    def test_a_stricter_candidate_moves_the_halt_earlier(self, tmp_path: Path) -> None:
        """Halts can move both ways: a stricter canary margin halts at cycle 11."""
        strict = write_policy(tmp_path / "strict.yaml", collapse={"canary_margin": 0.15})
        code, out, _ = cli(
            "diff",
            "--base",
            DEFAULT,
            "--candidate",
            strict,
            trace_named("collapse-narrowing.jsonl"),
        )
        assert code == 1
        assert "first halt at cycle 12 -> at cycle 11" in out
        assert "collapse allow -> halt (collapse_detected): 1" in out

    def test_a_malformed_trace_wins_over_changes(self, tmp_path: Path) -> None:
        """Exit 2 when a trace could not be compared in full, even if others changed."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"type": "session", "trace_version": 1, "session_id": "s"}\n{"type"\n')
        code, _, err = cli(
            "diff", "--base", DEFAULT, "--candidate", LOOSE, str(bad), *map(str, TRACES)
        )
        assert code == 2
        assert err.startswith(f"{bad}:2:")

    def test_both_policies_are_required(self) -> None:
        """--base and --candidate are both required (usage error, exit 2)."""
        code, _, err = cli("diff", "--base", DEFAULT, trace_named("healthy-session.jsonl"))
        assert code == 2
        assert "--candidate" in err


def git(repo: Path, *argv: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *argv], capture_output=True, text=True, check=True, env=GIT_ENV
    )
    return done.stdout


GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

OVERLAY = (
    "apiVersion: prunewarden/v1\nkind: Policy\nextends: ../shared/base.yaml\n"
    "metadata: {{name: prod, version: {version}}}\nspec:\n  collapse: {{spread_floor: {floor}}}\n"
)
SHARED = (
    "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {{name: base, version: {version}}}\n"
    "spec:\n  eviction: {{stability_delta: {delta}}}\n"
)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository whose main commit holds prod.yaml extending ../shared/base.yaml; the
    working tree then loosens both (the change under review)."""
    repo = tmp_path / "repo"
    (repo / "policies").mkdir(parents=True)
    (repo / "shared").mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "policies" / "prod.yaml").write_text(OVERLAY.format(version="1.0.0", floor=0.08))
    (repo / "shared" / "base.yaml").write_text(SHARED.format(version="1.0.0", delta=0.25))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "policies")
    (repo / "policies" / "prod.yaml").write_text(OVERLAY.format(version="1.1.0", floor=0.01))
    (repo / "shared" / "base.yaml").write_text(SHARED.format(version="1.1.0", delta=0.9))
    return repo


class TestDiffBaseRef:
    def test_base_and_its_chain_come_from_the_revision(
        self, repository: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """--base-ref main reads prod.yaml and the base it extends (relative, another folder)
        as main holds them; --base defaults to the candidate's path."""
        monkeypatch.chdir(repository)
        traces = map(str, TRACES)
        code, out, err = cli(
            "--base-dir",
            "shared",
            "diff",
            "--base-ref",
            "main",
            "--candidate",
            "policies/prod.yaml",
            "--format",
            "json",
            *traces,
        )
        assert (code, err) == (1, "")
        report = json.loads(out)
        assert (report["base"]["name"], report["base"]["version"]) == ("prod", "1.0.0")
        assert report["candidate"]["version"] == "1.1.0"
        committed = tmp_copy_of_main(repository)
        shared = committed.parents[1] / "shared"
        assert report["base"]["digest"] == load_policy(committed, base_dirs=(shared,)).digest

    def test_the_same_revision_changes_nothing(self, repository: Path) -> None:
        """Comparing main with itself through --base and --base-ref exits 0."""
        prod = repository / "policies" / "prod.yaml"
        git(repository, "stash", "-q")
        code, out, err = cli(
            "--base-dir",
            str(repository / "shared"),
            "diff",
            "--base-ref",
            "main",
            "--base",
            str(prod),
            "--candidate",
            str(prod),
            *map(str, TRACES),
        )
        assert (code, err) == (0, "")
        assert out.splitlines()[-1].endswith("compared: 0 changed")

    def test_a_file_missing_at_the_revision_exits_three(self, repository: Path) -> None:
        """A policy the revision does not hold is one located line, exit 3."""
        new = repository / "policies" / "new.yaml"
        new.write_text(OVERLAY.format(version="1.0.0", floor=0.08))
        code, _, err = cli("diff", "--base-ref", "main", "--candidate", str(new), str(TRACES[0]))
        assert code == 3
        assert (
            err
            == "main:policies/new.yaml: $: not in git revision main (or main is not a revision)\n"
        )

    def test_problems_name_the_revision_file(self, repository: Path) -> None:
        """An invalid base at the revision is reported as REF:path, not as a scratch copy."""
        base = repository / "shared" / "base.yaml"
        base.write_text(SHARED.format(version="1.2.0", delta=-1))
        git(repository, "commit", "-q", "-am", "a bad base")
        prod = str(repository / "policies" / "prod.yaml")
        shared = str(repository / "shared")
        argv = ["--base-dir", shared, "diff", "--base-ref", "HEAD", "--candidate", prod]
        code, _, err = cli(*argv, str(TRACES[0]))
        assert code == 3
        assert err.startswith("HEAD:shared/base.yaml:5:")

    def test_base_or_base_ref_is_required(self) -> None:
        """Without --base and --base-ref there is nothing to compare with: exit 2."""
        code, _, err = cli("diff", "--candidate", LOOSE, str(TRACES[0]))
        assert code == 2
        assert "--base FILE or --base-ref REF is required" in err


def tmp_copy_of_main(repo: Path) -> Path:
    """main's policies checked out in a worktree of their own (the way to load them without
    --base-ref)."""
    tree = repo.parent / "main-tree"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), "main")
    return tree / "policies" / "prod.yaml"
