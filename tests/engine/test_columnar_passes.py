"""An eviction pass decided over columns gives the general path's decisions, field by field.

The differential corpus: every golden eviction case (tests/cases/eviction/, under its own
policy), the benchmark's 200-segment pass, and generated passes under policies that move each
condition (pinned kinds, optional perturbation and tombstone, a zero delta, a wider score range).
Each pass is decided twice, with the pass's id and time fixed so that both ways stamp alike: over
columns, and down the general path (the engine's columnar binding removed). Both logs verify, and
the readers see the same decisions in the version 3 record as in the version 2 one.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.generators import eviction_documents
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, Decision, Engine, InputError, PassResult, Policy, parse_policy
from prunewarden._resources import schema
from prunewarden.audit import decision_rows
from prunewarden.cli._main import run

from benchmarks.workloads.eviction import evictions as benchmark_pass

CASES = sorted((Path(__file__).parents[1] / "cases" / "eviction").glob("*.yaml"))
RECORD = Draft202012Validator(schema("audit-record"))
PASS_ID, AT = "ab" * 16, "2026-01-02T03:04:05.000006Z"
# Policies (spec overrides) under which generated passes are decided: each moves a condition.
SPECS: dict[str, dict[str, Any]] = {
    "default": {},
    "perturbation-optional": {"eviction": {"require_perturbation": False}},
    "tombstone-optional": {"eviction": {"require_tombstone": False}},
    "pinned-turns": {"eviction": {"pinned_kinds": ["turn", "credential"]}},
    "zero-delta": {"eviction": {"stability_delta": 0}},
    "wide-scores": {"scores": {"min": 0, "max": 10}},
}
ROW_FIELDS = ("decision_id", "index", "check", "outcome", "enforced", "reasons", "actions")


@pytest.fixture(autouse=True)
def fixed_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pass gets the same id and time, so that the two ways' decisions compare whole."""
    monkeypatch.setattr("prunewarden.decision.new_decision_id", lambda: PASS_ID)
    monkeypatch.setattr("prunewarden.decision.utc_now", lambda: AT)


def general(engine: Engine) -> Engine:
    """The same engine with its passes sent down the general path."""
    engine.passes.columnar = None
    return engine


def both(
    policy: Policy, items: list[dict[str, Any]], candidates: list[str] | None, tmp: Path
) -> tuple[PassResult, PassResult, Path, Path]:
    """The pass decided over columns and down the general path, each logged to its own file."""
    paths = tmp / "columns.jsonl", tmp / "general.jsonl"
    with AuditLog(paths[0]) as first, AuditLog(paths[1]) as second:
        columns = Engine(policy, audit=first).authorize_pass(items, candidates)
        typed = general(Engine(policy, audit=second)).authorize_pass(items, candidates)
    return columns, typed, *paths


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def verified(path: Path) -> bool:
    out, err = io.StringIO(), io.StringIO()
    return run(["audit", "verify", str(path)], out, err) == 0


def rows(path: Path) -> list[dict[str, Any]]:
    """What the readers see of the pass: each decision's fields."""
    (record,) = [r for r in records(path) if r["kind"] == "pass"]
    return [{k: row[k] for k in (*ROW_FIELDS, "subject")} for row in decision_rows(record)]


def assert_same(columns: PassResult, typed: PassResult) -> None:
    """Equal decisions (as values and as documents), and columns that say what they say."""
    built: list[Decision] = list(columns)
    assert built == list(typed)
    assert [d.to_dict() for d in built] == [d.to_dict() for d in typed]
    assert columns.allowed == [d.outcome == "allow" for d in built]
    assert columns.codes == tuple(d.codes for d in built)
    assert (columns.pass_id, columns.evict_ids) == (typed.pass_id, typed.evict_ids)


def load_case(path: Path, make_policy: Callable[..., Policy]) -> tuple[Policy, dict[str, Any]]:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    policy = make_policy(**case["policy"]) if "policy" in case else Engine.default().policy
    return policy, case["input"]


def item_of(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in ("check", "eviction_candidates")}


class TestGoldenCases:
    @pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
    def test_each_case_decides_alike(
        self, path: Path, make_policy: Callable[..., Policy], tmp_path: Path
    ) -> None:
        """A golden case as a one-segment pass: the same decision both ways, and the same
        rows in the two records."""
        policy, document = load_case(path, make_policy)
        candidates = list(document.get("eviction_candidates", []))
        columns, typed, first, second = both(policy, [item_of(document)], candidates, tmp_path)
        assert_same(columns, typed)
        assert rows(first) == rows(second)

    def test_the_cases_take_the_columns_unless_unusual(
        self, make_policy: Callable[..., Policy], tmp_path: Path
    ) -> None:
        """Every case but the audit-mode one is decided over columns (a version 3 record)."""
        versions = {}
        for path in CASES:
            policy, document = load_case(path, make_policy)
            log = tmp_path / f"{path.stem}.jsonl"
            with AuditLog(log) as audit:
                Engine(policy, audit=audit).authorize_pass([item_of(document)])
            versions[path.stem] = records(log)[-1]["record_version"]
        assert {stem for stem, version in versions.items() if version != 3} == {
            "eviction-audit-mode"
        }


class TestBenchmarkPass:
    def test_two_hundred_segments_decide_alike(self, tmp_path: Path) -> None:
        """The benchmark's pass (every reason, a third refused): equal decisions, both logs
        verify and validate, and the readers see the same decisions in v3 as in v2."""
        items, candidates = benchmark_pass()
        policy = Engine.default().policy
        columns, typed, first, second = both(policy, items, candidates, tmp_path)
        assert_same(columns, typed)
        assert [r["record_version"] for r in records(first)] == [2, 3]
        assert [r["record_version"] for r in records(second)] == [2, 2]
        assert verified(first)
        assert verified(second)
        for record in records(first) + records(second):
            assert list(RECORD.iter_errors(record)) == []
        assert rows(first) == rows(second)
        assert set(columns.codes) >= {("pinned",), ("unscoreable",), ("no_tombstone",)}


@st.composite
def passes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str] | None]:
    """A pass of distinct segments, some scored against others of the pass, and its candidates
    (the pass's own ids when None)."""
    documents = draw(st.lists(eviction_documents(), min_size=1, max_size=12))
    items: dict[str, dict[str, Any]] = {}
    for document in documents:
        items.setdefault(document["segment"]["id"], item_of(document))
    ids = list(items)
    for item in items.values():
        if draw(st.booleans()):
            extra = draw(st.lists(st.sampled_from(ids), unique=True, max_size=3))
            depends = item["segment"].get("score_dependencies", [])
            item["segment"]["score_dependencies"] = list(dict.fromkeys([*depends, *extra]))
    candidates = draw(st.none() | st.lists(st.sampled_from(ids), unique=True))
    return list(items.values()), candidates


def policies() -> Iterator[tuple[str, Policy]]:
    for name, spec in SPECS.items():
        document = {
            "apiVersion": "prunewarden/v1",
            "kind": "Policy",
            "metadata": {"name": name, "version": "1.0.0"},
            "spec": spec,
        }
        yield name, parse_policy(yaml.safe_dump(document), f"<{name}>")


POLICIES = dict(policies())


class TestGeneratedPasses:
    @pytest.mark.parametrize("name", sorted(POLICIES))
    @settings(max_examples=40)
    @given(drawn=passes())
    def test_generated_passes_decide_alike(
        self, name: str, drawn: tuple[list[dict[str, Any]], list[str] | None]
    ) -> None:
        """Any valid pass under each policy: the same decisions over columns and down the
        general path (metadata included: it sends a pass down the general path)."""
        items, candidates = drawn
        policy = POLICIES[name]
        columns = Engine(policy).authorize_pass(items, candidates)
        typed = general(Engine(policy)).authorize_pass(items, candidates)
        assert_same(columns, typed)


class TestInvalidPasses:
    @pytest.mark.parametrize(
        "change",
        [
            lambda items: items.append(dict(items[0])),
            lambda items: items[1].update(score=1.5),
            lambda items: items[1].update(perturbed_score=-0.5),
            lambda items: items[0]["segment"].update(kind=""),
        ],
        ids=["repeated-id", "score-out-of-range", "perturbed-out-of-range", "empty-kind"],
    )
    def test_an_invalid_pass_is_refused_alike(self, change: Callable[[Any], None]) -> None:
        """A pass the columns cannot decide raises the general path's located InputError,
        before anything is decided."""
        items, _ = benchmark_pass(3)
        change(items)
        problems = []
        for engine in (Engine.default(), general(Engine.default())):
            with pytest.raises(InputError) as raised:
                engine.authorize_pass(items)
            problems.append([str(p) for p in raised.value.problems])
        assert problems[0] == problems[1]
        assert problems[0]

    def test_a_segment_named_twice_among_given_candidates_is_refused(self, tmp_path: Path) -> None:
        """A pass naming one segment twice, with candidates that name it once (so the candidate
        list is well formed), is refused with the general path's located InputError; nothing is
        decided, evicted or logged."""
        items, _ = benchmark_pass(3)
        items.append(dict(items[0]))
        candidates = [item["segment"]["id"] for item in items[:3]]
        problems = []
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            for engine in (Engine.default(audit=audit), general(Engine.default(audit=audit))):
                with pytest.raises(InputError) as raised:
                    engine.authorize_pass(items, candidates)
                problems.append([str(p) for p in raised.value.problems])
        assert problems[0] == problems[1]
        assert "$.evictions[3].segment.id: duplicate segment id" in problems[0][0]
        assert not path.exists() or "pass" not in {r["kind"] for r in records(path)}


class TestTheGeneralPathsResult:
    def test_a_pass_decided_one_by_one_keeps_its_id_and_time(self) -> None:
        """A pass down the general path: its result carries the pass's id and time, those of
        each of its decisions, as a pass decided over columns does."""
        items, candidates = benchmark_pass(3)
        typed = general(Engine.default()).authorize_pass(items, candidates)
        columns = Engine.default().authorize_pass(items, candidates)
        assert (typed.pass_id, typed.evaluated_at) == (PASS_ID, AT)
        assert (columns.pass_id, columns.evaluated_at) == (PASS_ID, AT)
        assert {(d.pass_id, d.evaluated_at) for d in typed} == {(PASS_ID, AT)}

    def test_an_empty_pass_has_no_id_and_no_time(self) -> None:
        """A pass of no segment decides nothing: its result is empty, with no id or time."""
        typed = general(Engine.default()).authorize_pass([])
        assert (len(typed), typed.pass_id, typed.evaluated_at, typed.evict_ids) == (0, "", "", ())


def halt(engine: Engine, session_id: str) -> Engine:
    """Halt ``session_id`` on the engine: its collapse guard sees the buffer narrow."""
    session = engine.session(session_id)
    flat = {"task": 0.5, "a": 0.5, "b": 0.52, "c": 0.54}
    session.observe_cycle({"task": 0.9, "a": 0.1, "b": 0.5, "c": 0.95}, ["task"])
    session.observe_cycle(flat, ["task"])
    session.observe_cycle(flat, ["task"])
    assert session.halted
    return engine


class TestPassesOfASession:
    def test_a_pass_of_a_halted_session_is_refused_by_its_halt(self, tmp_path: Path) -> None:
        """A pass naming a halted session evicts nothing: every segment is refused by the
        halt, as the general path refuses it, and the pass is recorded decision by decision."""
        items, candidates = benchmark_pass(6)
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            result = halt(Engine.default(audit=audit), "s").authorize_pass(
                items, candidates, session_id="s"
            )
        assert result.evict_ids == ()
        assert all("pruning_halted" in codes for codes in result.codes)
        (record,) = [r for r in records(path) if r["kind"] == "pass"]
        assert (record["record_version"], record["session_id"]) == (2, "s")

    def test_a_pass_of_a_running_session_is_decided_over_columns(self, tmp_path: Path) -> None:
        """A pass naming a session that is not halted is decided over columns (one version 3
        record naming the session), with the general path's decisions."""
        items, candidates = benchmark_pass(6)
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit:
            engine = Engine.default(audit=audit)
            engine.session("s")
            columns = engine.authorize_pass(items, candidates, session_id="s")
        typed = general(Engine.default()).authorize_pass(items, candidates, session_id="s")
        assert_same(columns, typed)
        assert columns.evict_ids
        (record,) = [r for r in records(path) if r["kind"] == "pass"]
        assert (record["record_version"], record["session_id"]) == (3, "s")

    @pytest.mark.parametrize(
        ("fields", "where"),
        [({"session_id": 7}, "$.session_id"), ({"labels": {"team": 1}}, "$.labels.team")],
        ids=["session-id", "label-value"],
    )
    def test_a_callers_fields_are_checked_first(
        self, fields: dict[str, Any], where: str, tmp_path: Path
    ) -> None:
        """A session id that is no string, or a label value that is none, raises a located
        InputError before anything is decided or logged."""
        items, candidates = benchmark_pass(3)
        path = tmp_path / "audit.jsonl"
        with AuditLog(path) as audit, pytest.raises(InputError) as raised:
            Engine.default(audit=audit).authorize_pass(items, candidates, **fields)
        assert [p.path for p in raised.value.problems] == [where]
        assert not path.exists() or "pass" not in {r["kind"] for r in records(path)}
