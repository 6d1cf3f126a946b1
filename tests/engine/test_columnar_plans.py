"""A plan whose evictions were decided over columns gives the general path's plan, field by field.

The differential corpus: the golden plan cases (tests/cases/plan/, and the windows of
tests/test_planner.py's groups), generated windows (the fuzz generator's, and larger ones with
groups and dependencies between segments) under policies that move each eviction condition, and
Engine.plan and Session.plan over them, with a halted session, an explained pass and an audit log
that fails. Each plan is made twice with the pass's id and time fixed: over columns, and down the
general path (the engine's columnar binding removed). The plans and every decision (as a value and
as a document) are equal; the plan over columns writes one version 3 record (its evictions as
columns), the general path a version 2 one, and every reader (``decision_rows``, ``audit query``,
``audit report``, ``audit sql``, ``audit export --parquet``) finds the same decisions in both;
both logs verify, with the CLI and with the Node verifier.
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import subprocess
from collections.abc import Callable
from hashlib import sha256
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.generators import ids, plan_documents, window_segments
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, Decision, Engine, Plan, Policy, parse_policy
from prunewarden._resources import schema
from prunewarden.audit import decision_rows, verdict_entry
from prunewarden.cli._main import run
from prunewarden.planner import PlanDecisions
from prunewarden.planner._decisions import DeferredDecision

VERIFIER = Path(__file__).parents[2] / "examples" / "verify" / "jcs_verify.mjs"
RECORD = Draft202012Validator(schema("audit-record"))
CASES = sorted((Path(__file__).parents[1] / "cases" / "plan").glob("*.yaml"))
PASS_ID, AT = "cd" * 16, "2026-01-02T03:04:05.000006Z"
# Policies (spec overrides) under which generated windows are planned: each moves a condition.
SPECS: dict[str, dict[str, Any]] = {
    "default": {},
    "perturbation-optional": {"eviction": {"require_perturbation": False}},
    "tombstone-optional": {"eviction": {"require_tombstone": False}},
    "pinned-turns": {"eviction": {"pinned_kinds": ["turn", "credential"]}},
    "zero-delta": {"eviction": {"stability_delta": 0}},
    "staleness-audit": {"staleness": {"mode": "audit"}},
}
# What differs between two writes of one pass: the time it took, and so its hash.
UNSTABLE_FIELDS = ("duration_ns", "hash", "prev_hash")


@pytest.fixture(autouse=True)
def fixed_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pass gets the same id and time, so that the two ways' decisions compare whole."""
    monkeypatch.setattr("prunewarden.decision.new_decision_id", lambda: PASS_ID)
    monkeypatch.setattr("prunewarden.decision.utc_now", lambda: AT)


def general(engine: Engine) -> Engine:
    """The same engine with its plans' evictions sent down the general path."""
    engine.passes.columnar = None
    return engine


def segment(seg_id: str, score: float, **fields: Any) -> dict[str, Any]:
    text = fields.pop("text", f"text of {seg_id}")
    return {
        "id": seg_id,
        "kind": "turn",
        "text": text,
        "tokens": 50,
        "score": score,
        "perturbed_score": score,
        "text_sha256": sha256(text.encode()).hexdigest(),
        **fields,
    }


def policy_of(name: str, spec: dict[str, Any]) -> Policy:
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": name, "version": "1.0.0"},
        "spec": spec,
    }
    return parse_policy(yaml.safe_dump(document), f"<{name}>")


POLICIES = {name: policy_of(name, spec) for name, spec in SPECS.items()}


def stable(path: Path) -> list[dict[str, Any]]:
    """The log's pass records, without what differs between two writes of one pass."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [
        {k: v for k, v in record.items() if k not in UNSTABLE_FIELDS}
        for record in records
        if record["kind"] == "pass"
    ]


def cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert run(list(argv), out, err) == 0, err.getvalue()
    return out.getvalue()


def verified(path: Path) -> bool:
    out, err = io.StringIO(), io.StringIO()
    return run(["audit", "verify", str(path)], out, err) == 0


def node_verified(path: Path) -> bool:
    """The Node verifier's chain check (True where node is not installed: nothing to run)."""
    node = shutil.which("node")
    if node is None:
        return True
    result = subprocess.run(
        [node, str(VERIFIER), "chain", str(path)], capture_output=True, text=True, check=False
    )
    return result.returncode == 0


def rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decisions readers find in pass records, but for the version of the record."""
    return [
        {k: v for k, v in row.items() if k != "record_version"}
        for record in records
        for row in decision_rows(record)
    ]


def read(path: Path) -> dict[str, Any]:
    """What audit query, report, sql and Parquet export (where duckdb is installed) read of a
    log's passes (a session's own decisions have ids of their own)."""
    query = cli("audit", "query", "--format", "json", str(path)).splitlines()
    report = cli("audit", "report", "--format", "json", str(path))
    found: dict[str, Any] = {
        "query": [
            {k: v for k, v in row.items() if k != "record_version"}
            for row in map(json.loads, query)
            if row["decision_id"].startswith(f"{PASS_ID}-")
        ],
        # The counts by verdict (a session's own decisions and halts carry the wall-clock time).
        "report": [
            {k: v for k, v in row.items() if k not in {"first_seen", "last_seen"}}
            for row in map(json.loads, report.splitlines())
            if "count" in row
        ],
    }
    if find_spec("duckdb") is not None:
        statement = (
            'SELECT decision_id, "check", outcome, enforced, reason_codes, segment_id, cycle,'
            " actions::VARCHAR AS actions, subject::VARCHAR AS subject, pass_id"
            " FROM decisions WHERE decision_id LIKE 'cdcd%' ORDER BY decision_id"
        )
        found["sql"] = cli("audit", "sql", "--format", "json", statement, str(path))
        parquet = path.with_suffix(".parquet")
        cli("audit", "export", "--parquet", str(parquet), str(path))
        exported = (
            'SELECT decision_id, "check", outcome, enforced, reason_codes, subject'
            " FROM decisions WHERE decision_id LIKE 'cdcd%' ORDER BY decision_id"
        )
        found["parquet"] = cli("audit", "sql", "--format", "json", exported, str(parquet))
    return found


def assert_same(columns: Plan, typed: Plan) -> None:
    """Equal plans, and equal decisions as values and as documents, read in any order."""
    backwards: list[Decision] = [
        columns.decisions[i] for i in reversed(range(len(columns.decisions)))
    ]
    assert backwards[::-1] == list(typed.decisions)
    assert columns == typed
    assert columns.to_dict() == typed.to_dict()


def assert_same_but_halt(columns: Plan, typed: Plan) -> None:
    """:func:`assert_same` for plans of two engines each of which halted its own session: the
    collapse decision each halt names is its own (a random id)."""
    for plan in (columns, typed):
        for decision in plan.decisions:
            for reason in decision.reasons:
                reason.detail.pop("collapse_decision", None)
    assert_same(columns, typed)


def planned(
    policy: Policy, make: Callable[[Engine], Plan], tmp: Path
) -> tuple[Plan, Plan, Path, Path]:
    """``make`` run over columns and down the general path, each engine logging to its file."""
    paths = tmp / "columns.jsonl", tmp / "general.jsonl"
    with AuditLog(paths[0]) as first, AuditLog(paths[1]) as second:
        columns = make(Engine(policy, audit=first))
        typed = make(general(Engine(policy, audit=second)))
    return columns, typed, *paths


def assert_logged_alike(first: Path, second: Path) -> None:
    """A plan with evictions over columns is one version 3 record, valid, holding the version 2
    record's plan and decisions; one without is the version 2 record itself. Every reader finds
    the same decisions in both logs, and both verify."""
    columns, typed = stable(first), stable(second)
    assert [r["record_version"] for r in typed] == [2] * len(typed)
    assert len(columns) == len(typed)
    for record, general_record in zip(columns, typed, strict=True):
        if record["record_version"] == 2:
            assert record == general_record
            continue
        assert record["record_version"] == 3
        assert record["plan"] == general_record["plan"]
        assert "verdicts" in record
    for line in first.read_text(encoding="utf-8").splitlines():
        assert list(RECORD.iter_errors(json.loads(line))) == []
    assert rows(columns) == rows(typed)
    assert read(first) == read(second)
    assert verified(first)
    assert verified(second)
    assert node_verified(first)
    assert node_verified(second)


GROUPS = [
    # tests/test_planner.py's groups: mates judged against each other, a chosen segment's
    # dependants, a pinned member, and an unstable member refusing its group.
    [
        segment("call", 0.25, group="t1"),
        segment("result", 0.25, group="t1", score_dependencies=["call"]),
    ],
    [
        segment("base", 0.125),
        segment("call", 0.25, group="t1", score_dependencies=["result"]),
        segment("result", 0.25, group="t1", score_dependencies=["base"]),
        segment("x", 0.5),
    ],
    [segment("rule", 0.125, group="g", kind="constraint"), segment("note", 0.125, group="g")],
    [
        segment("a", 0.125, group="g"),
        segment("b", 0.25, group="g", perturbed_score=0.75),
        segment("c", 0.375),
    ],
]


class TestGoldenPlans:
    @pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
    def test_each_case_plans_alike(self, path: Path, tmp_path: Path) -> None:
        """A golden plan case: the same plan both ways, and the same pass record."""
        document = yaml.safe_load(path.read_text(encoding="utf-8"))["input"]
        policy = Engine.default().policy
        columns, typed, first, second = planned(policy, lambda e: e.plan(document), tmp_path)
        assert_same(columns, typed)
        assert_logged_alike(first, second)

    @pytest.mark.parametrize("window", GROUPS, ids=["mates", "dependants", "pinned", "unstable"])
    def test_each_group_window_plans_alike(self, window: list[Any], tmp_path: Path) -> None:
        """The planner's group windows: the same plan and record both ways."""
        policy = Engine.default().policy
        document = {"segments": window, "keep_top_k": 0}
        columns, typed, first, second = planned(policy, lambda e: e.plan(document), tmp_path)
        assert_same(columns, typed)
        assert_logged_alike(first, second)


@st.composite
def windows(draw: st.DrawFn) -> dict[str, Any]:
    """A window of up to 12 segments, some in groups, some scored against others of it."""
    chosen = draw(st.lists(ids, unique=True, min_size=1, max_size=12))
    segments = [draw(window_segments(seg_id)) for seg_id in chosen]
    for item in segments:
        if draw(st.booleans()):
            item["score_dependencies"] = draw(st.lists(st.sampled_from(chosen), max_size=2))
        if draw(st.integers(0, 3)) == 0:
            item["group"] = draw(st.sampled_from(["g1", "g2"]))
    target = draw(st.sampled_from(["free_tokens", "keep_top_k"]))
    return {
        "segments": segments,
        target: draw(st.integers(0, 12 if target == "keep_top_k" else 600)),
    }


def plan_or_error(engine: Engine, document: dict[str, Any]) -> Plan | str:
    try:
        return engine.plan(document)
    except Exception as exc:  # noqa: BLE001 - both ways must refuse a document alike
        return type(exc).__name__


class TestGeneratedWindows:
    @pytest.mark.parametrize("name", sorted(POLICIES))
    @settings(max_examples=25, deadline=None)
    @given(document=windows() | plan_documents())
    def test_generated_windows_plan_alike(self, name: str, document: dict[str, Any]) -> None:
        """Any window under each policy: the same plan over columns and down the general path
        (an invalid one refused alike)."""
        policy = POLICIES[name]
        columns = plan_or_error(Engine(policy), document)
        typed = plan_or_error(general(Engine(policy)), document)
        if isinstance(columns, str) or isinstance(typed, str):
            assert columns == typed
            return
        assert_same(columns, typed)


WINDOW = [
    segment("sys", 0.9, kind="constraint"),
    *(
        segment(f"s{i}", 0.1 + i / 100, perturbed_score=0.5 if i % 5 == 0 else None)
        for i in range(20)
    ),
]


def halted(engine: Engine, session_id: str) -> Engine:
    """Halt ``session_id`` on the engine: its collapse guard sees the buffer narrow."""
    session = engine.session(session_id)
    flat = {"task": 0.5, "a": 0.5, "b": 0.52, "c": 0.54}
    session.observe_cycle({"task": 0.9, "a": 0.1, "b": 0.5, "c": 0.95}, ["task"])
    session.observe_cycle(flat, ["task"])
    session.observe_cycle(flat, ["task"])
    assert session.halted
    return engine


def clean(window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if v is not None} for s in window]


class TestSessionsAndRefusals:
    @pytest.mark.parametrize("name", ["default", "staleness-audit"])
    def test_session_plans_alike(self, name: str, tmp_path: Path) -> None:
        """Session.plan, twice in a session: the same plans and records both ways."""

        def make(engine: Engine) -> Plan:
            session = engine.session("s")
            session.plan(clean(WINDOW), free_tokens=300)
            return session.plan(clean(WINDOW), keep_top_k=4)

        columns, typed, first, second = planned(POLICIES[name], make, tmp_path)
        assert_same(columns, typed)
        assert columns.evict
        assert_logged_alike(first, second)

    @pytest.mark.parametrize("name", ["default", "staleness-audit"])
    def test_a_halted_session_named_by_engine_plan_refuses_alike(
        self, name: str, tmp_path: Path
    ) -> None:
        """Engine.plan naming a halted session: frozen, or (staleness in audit mode) every
        eviction refused by the halt, the same both ways."""
        document = {"segments": clean(WINDOW), "keep_top_k": 4, "session_id": "s"}
        columns, typed, first, second = planned(
            POLICIES[name], lambda e: halted(e, "s").plan(document), tmp_path
        )
        assert_same_but_halt(columns, typed)
        codes = {code for d in columns.decisions for code in d.codes}
        assert "pruning_halted" in codes
        assert "authorized" not in codes
        assert_logged_alike(first, second)

    def test_a_halted_session_plans_alike(self, tmp_path: Path) -> None:
        """Session.plan of the halted session itself (staleness in audit mode, so that its
        evictions are decided): the same plan both ways."""

        def make(engine: Engine) -> Plan:
            return halted(engine, "s").session("s").plan(clean(WINDOW), keep_top_k=4)

        columns, typed, first, second = planned(POLICIES["staleness-audit"], make, tmp_path)
        assert_same_but_halt(columns, typed)
        assert_logged_alike(first, second)

    def test_an_explained_plan_takes_the_general_path(self) -> None:
        """An explained plan's decisions carry explanations, as the general path's do."""
        document = {"segments": clean(WINDOW), "keep_top_k": 4}
        policy = POLICIES["default"]
        columns = Engine(policy).plan(document, explain=True)
        typed = general(Engine(policy)).plan(document, explain=True)
        assert_same(columns, typed)
        assert all(d.explanation is not None for d in columns.decisions)

    def test_an_explained_refusal_says_what_would_allow_it(self) -> None:
        """An explained plan whose eviction is refused (an unstable score) gives each refusing
        reason its would_allow, as the general path does."""
        window = [
            segment("a", 0.1, tombstone_written=True),
            segment("b", 0.2, tombstone_written=True, perturbed_score=0.9),
            segment("c", 0.8, tombstone_written=True),
        ]
        document = {"segments": window, "keep_top_k": 1}
        policy = POLICIES["default"]
        columns = Engine(policy).plan(document, explain=True)
        assert_same(columns, general(Engine(policy)).plan(document, explain=True))
        refused = [d for d in columns.decisions if d.check == "eviction" and d.blocks]
        assert [d.codes for d in refused] == [("unstable_score",)]
        assert all("would_allow" in r.detail for d in refused for r in d.reasons)

    def test_a_plan_that_cannot_be_logged_is_refused_alike(self) -> None:
        """An audit log that fails when the plan is written: nothing evicted, every decision
        refused with audit_unavailable, the same both ways."""
        plans = []
        for engine_of in (lambda e: e, general):
            stream = FailingStream()
            engine = engine_of(Engine(POLICIES["default"], audit=AuditLog(stream, fsync="never")))
            stream.failing = True
            plans.append(engine.plan({"segments": clean(WINDOW), "keep_top_k": 4}))
        assert_same(*plans)
        assert plans[0].evict == ()
        assert {d.codes for d in plans[0].decisions} == {("audit_unavailable",)}

    def test_a_plan_over_columns_is_one_v3_record(self, tmp_path: Path) -> None:
        """A plan whose evictions the columns decided writes them as columns, its staleness
        verdict in its place, and its summary; readers find its decisions in order."""
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            plan = Engine(POLICIES["default"], audit=audit).plan(
                {"segments": clean(WINDOW), "keep_top_k": 4}
            )
        (record,) = stable(path)
        assert (record["record_version"], record["pass"]) == (3, "plan")
        assert record["verdict_indices"] == [0]
        assert [v["check"] for v in record["verdicts"]] == ["staleness"]
        assert len(record["segments"]) == len(plan.decisions) - 1
        assert record["plan"]["evict"] == list(plan.evict)
        assert [r["decision_id"] for r in decision_rows(record)] == [
            d.decision_id for d in plan.decisions
        ]

    def test_an_unread_plan_builds_no_eviction_decision(self) -> None:
        """A plan over columns answers what it evicts without building a decision it holds
        for its evictions; reading one builds it."""
        plan = Engine(POLICIES["default"]).plan({"segments": clean(WINDOW), "keep_top_k": 4})
        assert isinstance(plan.decisions, PlanDecisions)
        entries = plan.decisions.entries
        assert plan.evict
        assert [type(e) for e in entries] == [Decision] + [DeferredDecision] * (len(entries) - 1)
        deferred = entries[1]
        assert isinstance(deferred, DeferredDecision)
        assert deferred._decision is None
        assert plan.decisions[1] is deferred.get()


class TestPickling:
    def test_a_plan_pickles_with_its_decisions_built(self) -> None:
        """A plan over columns pickles (to another process) as the general path's does."""
        document = {"segments": clean(WINDOW), "keep_top_k": 4}
        plan = Engine(POLICIES["default"]).plan(document)
        copy = pickle.loads(pickle.dumps(plan))  # noqa: S301 - our own object, just pickled
        assert copy == plan
        assert all(isinstance(e, Decision) for e in copy.decisions.entries)


class FailingStream(io.StringIO):
    """A text stream that raises OSError (no space left) on write while ``failing`` is set."""

    failing = False

    def write(self, text: str) -> int:
        if self.failing:
            raise OSError(28, "No space left on device")
        return super().write(text)


class TestDeferredVerdicts:
    def test_an_eviction_over_columns_says_what_its_built_decision_says(self) -> None:
        """Each eviction a plan decided over columns gives the version 2 verdict entry of the
        decision it builds (outcome, codes, each action once, the segment), whatever its
        reason: authorized, a missing perturbed score, an unstable score."""
        window = [
            segment("base", 0.125),
            segment("unperturbed", 0.3, perturbed_score=None),
            segment("shaky", 0.35, perturbed_score=0.9),
            segment("x", 0.5),
        ]
        plan = Engine(POLICIES["default"]).plan({"segments": clean(window), "keep_top_k": 0})
        assert isinstance(plan.decisions, PlanDecisions)
        deferred = [e for e in plan.decisions.entries if isinstance(e, DeferredDecision)]
        assert {e.codes for e in deferred} == {
            ("authorized",),
            ("perturbation_missing",),
            ("unstable_score",),
        }
        for entry in deferred:
            assert entry.verdict == verdict_entry(entry.get(), entry.request())
        assert [e.verdict["actions"] for e in deferred if e.segment.id == "shaky"] == [
            [{"action": "rescore", "ids": ["shaky"]}]
        ]
