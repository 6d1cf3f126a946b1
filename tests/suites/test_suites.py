"""Policy test suites: loading, table expansion, expectations, coverage, reports and the CLI."""

from __future__ import annotations

import io
import json
import re
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from prunewarden import Decision, load_builtin_policy
from prunewarden._resources import schema
from prunewarden.cli._main import run
from prunewarden.errors import SuiteError
from prunewarden.suites._coverage import applicable_reasons
from prunewarden.suites._expectations import vocabulary
from prunewarden.suites._load import discover_suites, load_suite
from prunewarden.suites._report import render_junit, run_files
from prunewarden.suites._run import quiet_engine, run_suite

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "inputs"
SHIPPED = [ROOT / "policies", ROOT / "examples" / "policies"]

HEADER = """\
apiVersion: prunewarden/v1
kind: TestSuite
name: {name}
policy: {policy}
"""

EVICTABLE = """\
fixtures:
  evictable:
    check: eviction
    segment: {id: s1, kind: turn, tombstone_written: true}
    score: 0.25
    perturbed_score: 0.3
    eviction_candidates: [s1]
"""


ONE_CASE = "cases:\n  - name: a\n    input: {fixture: evictable}\n    expect: {outcome: allow}\n"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def write_suite(
    folder: Path,
    body: str,
    *,
    name: str = "demo",
    policy: str = "builtin:default",
    file: str = "demo_test.yaml",
) -> Path:
    """A suite file in ``folder``: the header, then ``body`` (YAML; what follows the shared
    fixtures is dedented)."""
    fixtures = EVICTABLE if body.startswith(EVICTABLE) else ""
    path = folder / file
    cases = textwrap.dedent(body.removeprefix(fixtures))
    path.write_text(HEADER.format(name=name, policy=policy) + fixtures + cases)
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    return [str(problem) for problem in info.value.problems]


class TestShippedSuites:
    def test_shipped_suites_pass_with_full_reason_coverage(self) -> None:
        """The suites of the default and example policies pass and exercise every reason code
        their policies can produce."""
        code, out, err = cli(
            "test", *map(str, SHIPPED), "--format", "json", "--coverage-threshold", "100"
        )
        report = json.loads(out)
        assert (code, err) == (0, "")
        assert report["summary"]["failed"] == report["summary"]["errors"] == 0
        covered = {entry["policy"]["name"]: entry for entry in report["coverage"]}
        assert set(covered) == {"default", "long-horizon", "trial-audit", "content-pins"}
        for entry in covered.values():
            assert entry["never_exercised"] == []
            assert entry["rules_never_exercised"] == []
            assert entry["percent"] == 100.0
        assert len(covered["content-pins"]["rules"]) == 5

    def test_shipped_suites_cover_every_guard_reason_code(self) -> None:
        """Every reason code a guard gives (the seeds' codes) is applicable to the shipped
        policies, so 100% coverage means each one was seen."""
        guard_codes = {code for code, check in vocabulary().reasons.items() if check != "any"}
        guard_codes.discard("too_few_entries")  # needs min_live_entries; the seeds set none
        guard_codes.discard("group_member_refused")  # the planner's, for a group: not a guard's
        guard_codes.discard("unscored_removal")  # needs transition.require_scores; none sets it
        # A coding agent's compaction hook writes these of its own runs; no document gives them.
        guard_codes -= {"compaction_recorded", "compaction_blocked", "compaction_restored"}
        # The fidelity codes need spec.fidelity; no shipped policy sets it.
        guard_codes -= {
            "fact_lost",
            "negation_lost",
            "meaning_drift",
            "summary_is_error",
            "summary_opaque",
        }
        code, out, _ = cli("test", *map(str, SHIPPED), "--format", "json")
        assert code == 0
        for entry in json.loads(out)["coverage"]:
            assert set(entry["reasons"]) >= guard_codes
            assert all(entry["reasons"][c] > 0 for c in guard_codes)

    def test_every_seed_example_is_used_by_the_default_suite(self) -> None:
        """Each example document (a seed observation or its healthy counterpart) is an input of
        the default policy's suite."""
        text = (ROOT / "policies" / "tests" / "default_test.yaml").read_text()
        for example in EXAMPLES.glob("*.json"):
            assert example.name in text, example.name

    def test_lowering_the_spread_floor_fails_the_seed_narrowing_case(self, tmp_path: Path) -> None:
        """The issue's scenario: spread_floor 0.08 -> 0.06 in a copy of the default policy makes
        the default suite fail, naming the seed's collapse case and what differed."""
        policy = (ROOT / "policies" / "default.yaml").read_text()
        assert "spread_floor: 0.08 " in policy
        (tmp_path / "policies" / "tests").mkdir(parents=True)
        (tmp_path / "policies" / "default.yaml").write_text(
            policy.replace("spread_floor: 0.08 ", "spread_floor: 0.06 ")
        )
        suite = (ROOT / "policies" / "tests" / "default_test.yaml").read_text()
        (tmp_path / "policies" / "tests" / "default_test.yaml").write_text(
            suite.replace("../../examples/", f"{ROOT}/examples/")
        )
        code, out, _ = cli("test", str(tmp_path))
        assert code == 4
        failed = [line for line in out.splitlines() if line.lstrip().startswith("FAIL")]
        assert any("000 seed narrowing halts at cycle 5" in line for line in failed)
        assert any("spread 0.07 against the 0.08 floor" in line for line in failed)
        assert 'outcome: expected "halt", got "allow"' in out


class TestExpectations:
    def test_wrong_expectation_fails_showing_what_differed(self, tmp_path: Path) -> None:
        """A wrong outcome and reason list fail with expected, got and the difference."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: evicts
                input: {fixture: evictable}
                expect: {outcome: deny, reasons: [pinned, no_tombstone]}
            """,
        )
        code, out, _ = cli("test", str(tmp_path))
        assert code == 4
        assert "FAIL  evicts" in out
        assert 'outcome: expected "deny", got "allow" (authorized: ' in out
        assert (
            'reasons: expected ["pinned", "no_tombstone"], got ["authorized"] '
            '(missing ["pinned", "no_tombstone"]; unexpected ["authorized"])'
        ) in out
        assert f"{tmp_path / 'demo_test.yaml'}:" in out

    @pytest.mark.parametrize(
        ("expect", "message"),
        [
            ("{enforced: false}", "enforced: expected false, got true"),
            (
                "{reasons_include: [authorized, unstable_score]}",
                (
                    'reasons_include: expected ["authorized", "unstable_score"], '
                    'got ["authorized"] (missing ["unstable_score"])'
                ),
            ),
            (
                "{reasons_exclude: [authorized]}",
                (
                    'reasons_exclude: expected ["authorized"], got ["authorized"] '
                    '(present ["authorized"])'
                ),
            ),
            (
                "{actions_include: [rescore]}",
                'actions_include: expected ["rescore"], got [] (missing ["rescore"])',
            ),
        ],
    )
    def test_each_expectation_reports_its_difference(
        self, tmp_path: Path, expect: str, message: str
    ) -> None:
        """Every expectation field names itself, the expected and the actual value."""
        write_suite(
            tmp_path,
            EVICTABLE
            + f"""\
            cases:
              - name: case
                input: {{fixture: evictable}}
                expect: {expect}
            """,
        )
        result = run_suite(load_suite(tmp_path / "demo_test.yaml"))
        (case,) = result.results
        assert case.status == "failed"
        assert [str(m) for m in case.mismatches] == [message]

    def test_kept_compares_ids_and_order(self, tmp_path: Path) -> None:
        """kept must match exactly; a reordering is reported as such."""
        write_suite(
            tmp_path,
            f"""\
            cases:
              - name: order
                input: {{file: {EXAMPLES / "staleness-healthy.json"}}}
                expect: {{kept: [s4, s1, s2, s5]}}
              - name: members
                input: {{file: {EXAMPLES / "staleness-healthy.json"}}}
                expect: {{kept: [s1, s4, s2, s0]}}
            """,
        )
        order, members = run_suite(load_suite(tmp_path / "demo_test.yaml")).results
        assert order.mismatches[0].detail == "same items, different order"
        assert members.mismatches[0].detail == 'missing ["s0"]; unexpected ["s5"]'

    def test_actions_with_ids_must_match_exactly(self, tmp_path: Path) -> None:
        """{action, ids} matches only that action with exactly those ids."""
        write_suite(
            tmp_path,
            f"""\
            cases:
              - name: right
                input: {{file: {EXAMPLES / "eviction-unscoreable.json"}}}
                expect: {{actions_include: [{{action: rescore, ids: [turn-22]}}]}}
              - name: wrong ids
                input: {{file: {EXAMPLES / "eviction-unscoreable.json"}}}
                expect: {{actions_include: [{{action: rescore, ids: [turn-21]}}]}}
            """,
        )
        right, wrong = run_suite(load_suite(tmp_path / "demo_test.yaml")).results
        assert right.status == "passed"
        assert wrong.status == "failed"
        assert wrong.mismatches[0].field == "actions_include"


class TestHaltAtCycle:
    @pytest.mark.parametrize(
        ("example", "policy", "cycle"),
        [
            ("collapse-seed-narrowing.json", "builtin:default", 5),
            ("collapse-healthy.json", "builtin:default", None),
            (
                "collapse-seed-narrowing.json",
                str(ROOT / "examples/policies/long-horizon.yaml"),
                None,
            ),
        ],
    )
    def test_first_halting_prefix(
        self, tmp_path: Path, example: str, policy: str, cycle: int | None
    ) -> None:
        """halt_at_cycle is the last cycle of the shortest halting prefix, or null."""
        write_suite(
            tmp_path,
            f"""\
            cases:
              - name: halt
                input: {{file: {EXAMPLES / example}}}
                expect: {{halt_at_cycle: {json.dumps(cycle)}}}
            """,
            policy=policy,
        )
        (result,) = run_suite(load_suite(tmp_path / "demo_test.yaml")).results
        assert result.status == "passed", result.message

    def test_wrong_halt_cycle_names_the_first_halt(self, tmp_path: Path) -> None:
        """An early expectation fails with the cycle that halted and why."""
        write_suite(
            tmp_path,
            f"""\
            cases:
              - name: too early
                input: {{file: {EXAMPLES / "collapse-seed-narrowing.json"}}}
                expect: {{halt_at_cycle: 4}}
            """,
        )
        (result,) = run_suite(load_suite(tmp_path / "demo_test.yaml")).results
        assert str(result.mismatches[0]) == (
            "halt_at_cycle: expected 4, got 5 (first halt: collapse_detected)"
        )

    def test_cycle_numbers_come_from_the_snapshots(self, tmp_path: Path) -> None:
        """The reported cycle is the snapshot's own number, not its position."""
        write_suite(
            tmp_path,
            """\
            cases:
              - name: numbered
                input:
                  check: collapse
                  history:
                    - {cycle: 10, scores: {a: 0.5, b: 0.52}}
                    - {cycle: 20, scores: {a: 0.5, b: 0.52}}
                    - {cycle: 30, scores: {a: 0.5, b: 0.52}}
                    - {cycle: 40, scores: {a: 0.5, b: 0.52}}
                expect: {halt_at_cycle: 30}
            """,
        )
        (result,) = run_suite(load_suite(tmp_path / "demo_test.yaml")).results
        assert result.status == "passed", result.message

    def test_halt_at_cycle_is_only_for_collapse_inputs(self, tmp_path: Path) -> None:
        """On another check it is a suite error, located at the field."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: misplaced
                input: {fixture: evictable}
                expect: {halt_at_cycle: 3}
            """,
        )
        (problem,) = problems_of(tmp_path / "demo_test.yaml")
        assert re.search(r"demo_test.yaml:15:\d+: \$\.cases\[0\]\.expect\.halt_at_cycle: ", problem)
        assert "applies to collapse inputs only, not 'eviction'" in problem


class TestTables:
    def test_rows_expand_into_typed_cases(self, tmp_path: Path) -> None:
        """Each row is a case; a whole ${name} keeps the row value's type, an embedded one
        becomes text, and $${ stays literal."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: "perturbed ${p} gives ${outcome} ($${not} a parameter)"
                table:
                  - {p: 0.5, outcome: allow}
                  - {p: 0.5625, outcome: deny}
                  - {p: null, outcome: deny}
                input: {fixture: evictable, patch: {perturbed_score: "${p}"}}
                expect: {outcome: "${outcome}"}
            """,
        )
        suite = load_suite(tmp_path / "demo_test.yaml")
        assert [case.name for case in suite.cases] == [
            "perturbed 0.5 gives allow (${not} a parameter)",
            "perturbed 0.5625 gives deny (${not} a parameter)",
            "perturbed null gives deny (${not} a parameter)",
        ]
        assert [case.document["perturbed_score"] for case in suite.cases] == [0.5, 0.5625, None]
        assert [case.line for case in suite.cases] == [15, 16, 17]
        assert [case.parameters for case in suite.cases][1] == {"p": 0.5625, "outcome": "deny"}
        results = run_suite(suite).results
        assert [r.status for r in results] == ["passed"] * 3

    def test_names_without_parameters_get_the_row(self, tmp_path: Path) -> None:
        """A case name that uses no parameter is suffixed with the row's values."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: sweep
                table: [{kind: turn}, {kind: plan}]
                input: {fixture: evictable, patch: {segment: {kind: "${kind}"}}}
                expect: {outcome: allow}
            """,
        )
        names = [case.name for case in load_suite(tmp_path / "demo_test.yaml").cases]
        assert names == ["sweep [kind=turn]", "sweep [kind=plan]"]

    def test_row_problems_are_located_at_the_row(self, tmp_path: Path) -> None:
        """A missing or unused parameter, or a row value that does not fit where it lands, is
        reported at the row; the other rows still load."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: "row ${o}"
                table:
                  - {o: allow}
                  - {o: allowed}
                  - {x: 1}
                input: {fixture: evictable}
                expect: {outcome: "${o}"}
            """,
        )
        problems = problems_of(tmp_path / "demo_test.yaml")
        file = tmp_path / "demo_test.yaml"
        assert problems == [
            (
                f"{file}:16:13: $.cases[0].table[1].o: 'allowed' is not one of "
                "['allow', 'deny', 'halt']"
            ),
            f"{file}:17:9: $.cases[0].table[2]: row lacks parameter 'o', which the case uses",
            f"{file}:17:10: $.cases[0].table[2].x: parameter 'x' is not used by the case",
        ]

    def test_parameter_without_table(self, tmp_path: Path) -> None:
        """${name} in a case without a table is an error at its use."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: lonely
                input: {fixture: evictable}
                expect: {outcome: "${o}"}
            """,
        )
        (problem,) = problems_of(tmp_path / "demo_test.yaml")
        assert problem.endswith(
            "$.cases[0].expect.outcome: parameter ${o} is used but the case has no table"
        )

    def test_duplicate_names_after_expansion(self, tmp_path: Path) -> None:
        """Two rows that expand to the same name are refused at the second row."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: "kind ${k}"
                table: [{k: turn}, {k: turn}]
                input: {fixture: evictable, patch: {segment: {kind: "${k}"}}}
                expect: {outcome: allow}
            """,
        )
        (problem,) = problems_of(tmp_path / "demo_test.yaml")
        assert "$.cases[0].table[1]: duplicate case name 'kind turn' (first at line 14)" in problem

    @settings(max_examples=60, deadline=None)
    @given(
        value=st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        )
    )
    def test_whole_parameter_substitutes_any_value(self, value: Any) -> None:
        """A string that is exactly ${name} becomes the row's value, whatever it is."""
        from prunewarden.suites._tables import substitute as _substitute  # noqa: PLC0415

        body = {"a": ["${v}", {"b": "${v}"}], "c": "x ${w} y"}
        out = _substitute(body, {"v": value, "w": "text"})
        assert out == {"a": [value, {"b": value}], "c": "x text y"}


class TestFixturesAndInputs:
    def test_patch_merges_mappings_and_replaces_the_rest(self, tmp_path: Path) -> None:
        """A patch merges into the fixture's mappings; lists and scalars (null too) replace."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: patched
                input:
                  fixture: evictable
                  patch:
                    segment: {kind: negation}
                    eviction_candidates: [s1, s2]
                    perturbed_score: null
                expect: {reasons: [pinned, perturbation_missing]}
            """,
        )
        (case,) = load_suite(tmp_path / "demo_test.yaml").cases
        assert case.document["segment"] == {
            "id": "s1",
            "kind": "negation",
            "tombstone_written": True,
        }
        assert case.document["eviction_candidates"] == ["s1", "s2"]
        assert case.document["perturbed_score"] is None
        assert run_suite(load_suite(tmp_path / "demo_test.yaml")).results[0].status == "passed"

    def test_fixture_shared_by_cases_is_not_mutated(self, tmp_path: Path) -> None:
        """Cases patching one fixture each get their own document."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: a
                input: {fixture: evictable, patch: {segment: {kind: plan}}}
                expect: {outcome: allow}
              - name: b
                input: {fixture: evictable}
                expect: {outcome: allow}
            """,
        )
        first, second = load_suite(tmp_path / "demo_test.yaml").cases
        assert (first.document["segment"]["kind"], second.document["segment"]["kind"]) == (
            "plan",
            "turn",
        )

    def test_input_problems_are_located_where_written(self, tmp_path: Path) -> None:
        """An input problem points at the inline value, the patch, or the fixture (naming the
        case that used it), in the suite file."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: inline
                input: {check: eviction, segmnt: {id: x, kind: turn}, score: 0.3}
                expect: {outcome: allow}
              - name: patched
                input: {fixture: evictable, patch: {score: 1.5}}
                expect: {outcome: allow}
              - name: from fixture
                input: {fixture: evictable, patch: {check: staleness}}
                expect: {outcome: allow}
            """,
        )
        problems = problems_of(tmp_path / "demo_test.yaml")
        file = tmp_path / "demo_test.yaml"
        assert f"{file}:14:30: $.cases[0].input.segmnt: unknown field 'segmnt'" in "\n".join(
            problems
        )
        assert (
            f"{file}:17:48: $.cases[1].input.patch.score: 1.5 is outside the policy's score "
            "range [0.0, 1.0]"
        ) in problems
        assert any(
            p.startswith(f"{file}:8:5: $.fixtures.evictable.segment: unknown field 'segment'")
            and p.endswith("(input of case 'from fixture')")
            for p in problems
        )

    def test_input_file_problems_point_into_the_file(self, tmp_path: Path) -> None:
        """A malformed input file is reported in that file (naming the case), and at the
        suite's reference."""
        (tmp_path / "bad.json").write_text('{"check": "eviction",\n "score": NaN}')
        document = json.loads((EXAMPLES / "eviction-healthy.json").read_text())
        (tmp_path / "wrong.json").write_text(json.dumps({**document, "score": 2}, indent=1))
        write_suite(
            tmp_path,
            """\
            cases:
              - name: nan
                input: {file: bad.json}
                expect: {outcome: allow}
              - name: wrong
                input: {file: wrong.json}
                expect: {outcome: allow}
              - name: missing
                input: {file: nowhere.json}
                expect: {outcome: allow}
            """,
        )
        problems = problems_of(tmp_path / "demo_test.yaml")
        suite = tmp_path / "demo_test.yaml"
        assert problems == [
            f"{tmp_path / 'bad.json'}: $: invalid JSON: NaN is not a valid JSON number",
            (
                f"{suite}:7:19: $.cases[0].input.file: '{tmp_path / 'bad.json'}' is not a valid "
                "document (1 problem)"
            ),
            (
                f"{suite}:13:19: $.cases[2].input.file: cannot read '{tmp_path / 'nowhere.json'}': "
                "No such file or directory"
            ),
            (
                f"{tmp_path / 'wrong.json'}:9:11: $.score: 2 is outside the policy's score range "
                "[0.0, 1.0] (input of case 'wrong')"
            ),
        ]

    def test_yaml_input_files(self, tmp_path: Path) -> None:
        """An input file ending in .yaml is read with the strict YAML loader."""
        (tmp_path / "doc.yaml").write_text(
            yaml.safe_dump(json.loads((EXAMPLES / "eviction-healthy.json").read_text()))
        )
        write_suite(
            tmp_path,
            """\
            cases:
              - name: yaml
                input: {file: doc.yaml}
                expect: {outcome: allow}
            """,
        )
        (result,) = run_suite(load_suite(tmp_path / "demo_test.yaml")).results
        assert result.status == "passed"

    def test_unknown_fixture(self, tmp_path: Path) -> None:
        """A case naming a missing fixture lists the fixtures there are."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: a
                input: {fixture: evictible}
                expect: {outcome: allow}
            """,
        )
        (problem,) = problems_of(tmp_path / "demo_test.yaml")
        assert problem.endswith(
            "$.cases[0].input.fixture: no fixture named 'evictible' (fixtures: evictable)"
        )


class TestInvalidSuites:
    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (
                "cases:\n  - name: a\n    input: {check: eviction}\n    expect: {outcome: maybe}\n",
                (
                    "demo_test.yaml:8:23: $.cases[0].expect.outcome: 'maybe' is not one of "
                    "['allow', 'deny', 'halt']"
                ),
            ),
            (
                "cases:\n  - name: a\n    input: {check: eviction}\n    expect: {}\n",
                "demo_test.yaml:8:13: $.cases[0].expect: {} should be non-empty",
            ),
            (
                (
                    "cases:\n  - name: a\n    name: b\n    input: {check: eviction}\n"
                    "    expect: {outcome: allow}\n"
                ),
                (
                    "demo_test.yaml:7:5: $.cases[0].name: duplicate key 'name' (first defined at "
                    "line 6)"
                ),
            ),
            (
                "cases: []\n",
                "demo_test.yaml:5:8: $.cases: [] should be non-empty",
            ),
            (
                (
                    "cases:\n  - name: a\n    input: {check: eviction}\n"
                    "    expect: {reasons_exclude: [colapse_detected]}\n"
                ),
                (
                    "demo_test.yaml:8:32: $.cases[0].expect.reasons_exclude[0]: unknown reason "
                    "code 'colapse_detected' (see schemas/decision.v1.schema.json)"
                ),
            ),
            (
                (
                    "cases:\n  - name: a\n    input: {check: eviction}\n"
                    "    expect: {reasons: ['rule:pin-negations']}\n"
                ),
                (
                    "demo_test.yaml:8:24: $.cases[0].expect.reasons[0]: default@1.0.0 has no rule "
                    "'pin-negations' (rules: none)"
                ),
            ),
            (
                (
                    "cases:\n  - name: a\n    input: {check: eviction}\n"
                    "    expect: {actions_include: [pinn]}\n"
                ),
                "demo_test.yaml:8:32: $.cases[0].expect.actions_include[0]: unknown action 'pinn'",
            ),
        ],
    )
    def test_one_located_line_per_problem(self, tmp_path: Path, body: str, expected: str) -> None:
        """Each problem is FILE:LINE:COL: JSON-PATH: message."""
        write_suite(tmp_path, body)
        problems = problems_of(tmp_path / "demo_test.yaml")
        assert any(p.startswith(str(tmp_path / expected)) for p in problems), problems

    def test_every_problem_of_the_file_at_once(self, tmp_path: Path) -> None:
        """A case that fails the schema does not hide the problems of the other cases."""
        write_suite(
            tmp_path,
            """\
            cases:
              - name: a
                input: {check: eviction}
                expect: {outcome: maybe}
              - name: b
                input: {check: eviction, segment: {id: s, kind: turn}, score: 7}
                expect: {outcome: allow}
            """,
        )
        problems = problems_of(tmp_path / "demo_test.yaml")
        assert [p.split(": ")[1] for p in problems] == [
            "$.cases[0].expect.outcome",
            "$.cases[1].input.score",
        ]

    def test_invalid_suite_exits_three_and_the_others_still_run(self, tmp_path: Path) -> None:
        """exit 3; problems on stderr, located; the valid suite's results are still printed."""
        write_suite(
            tmp_path,
            "cases:\n  - name: a\n    input: {check: eviction}\n    expect: {outcome: maybe}\n",
            file="bad_test.yaml",
        )
        write_suite(
            tmp_path,
            EVICTABLE + "cases:\n  - name: fine\n    input: {fixture: evictable}\n"
            "    expect: {outcome: allow}\n",
            name="good",
            file="good_test.yaml",
        )
        code, out, err = cli("test", str(tmp_path))
        assert code == 3
        assert err.splitlines() == [
            (
                f"{tmp_path / 'bad_test.yaml'}:8:23: $.cases[0].expect.outcome: 'maybe' is not one "
                "of ['allow', 'deny', 'halt']"
            )
        ]
        assert "PASS  fine" in out
        assert f"{tmp_path / 'bad_test.yaml'}: INVALID (1 problem, on stderr)" in out

    def test_invalid_policy_is_reported_with_its_own_problems(self, tmp_path: Path) -> None:
        """An invalid policy gives its located problems and one at the suite's policy field."""
        (tmp_path / "p.yaml").write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: p, version: 1.0.0}\n"
            "spec:\n  collapse: {spread_floor: 2}\n"
        )
        write_suite(
            tmp_path,
            "cases:\n  - name: a\n    input: {check: eviction}\n    expect: {outcome: allow}\n",
            policy="p.yaml",
        )
        code, _, err = cli("test", str(tmp_path / "demo_test.yaml"))
        assert code == 3
        lines = err.splitlines()
        assert (
            f"{tmp_path / 'p.yaml'}:5:28: $.spec.collapse.spread_floor: 2 is greater" in (lines[1])
        )
        assert lines[0] == (
            f"{tmp_path / 'demo_test.yaml'}:4:9: $.policy: 'p.yaml' is not a valid policy "
            "(1 problem)"
        )

    def test_unknown_builtin_policy(self, tmp_path: Path) -> None:
        """builtin:NAME must name a bundled policy; no path tricks."""
        for policy in ("builtin:nope", "builtin:../default"):
            write_suite(
                tmp_path,
                "cases:\n  - name: a\n    input: {check: eviction}\n    expect: {outcome: allow}\n",
                policy=f"'{policy}'",
            )
            (problem,) = problems_of(tmp_path / "demo_test.yaml")
            assert problem.endswith(f"$.policy: no bundled policy '{policy}'")

    def test_unreadable_and_non_yaml_files(self, tmp_path: Path) -> None:
        """A missing file and broken YAML are located problems, exit 3."""
        (tmp_path / "broken_test.yaml").write_text("name: [unclosed\n")
        code, _, err = cli("test", str(tmp_path / "broken_test.yaml"))
        assert code == 3
        assert err.startswith(f"{tmp_path / 'broken_test.yaml'}:2:1: $: invalid YAML: ")

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        path=st.lists(st.integers(0, 40), max_size=6),
        value=st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-5, 5)
            | st.floats(-2, 2)
            | st.sampled_from(["${x}", "builtin:default", "evictable", "allow", "check", ""]),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["x", "file", "fixture", "patch", "check", "table", "name"]),
                    inner,
                    max_size=3,
                )
            ),
            max_leaves=6,
        ),
    )
    def test_any_mutation_loads_or_is_a_suite_error(
        self, tmp_path: Path, path: list[int], value: Any
    ) -> None:
        """Whatever one value of a valid suite is replaced by, loading gives a suite or a
        SuiteError, never another exception."""
        document = yaml.safe_load(
            HEADER.format(name="demo", policy="builtin:default")
            + EVICTABLE
            + textwrap.dedent(
                """\
                cases:
                  - name: "k ${k}"
                    table: [{k: turn}, {k: plan}]
                    input: {fixture: evictable, patch: {segment: {kind: "${k}"}}}
                    expect: {outcome: allow, reasons: [authorized]}
                  - name: collapse
                    input:
                      check: collapse
                      history: [{cycle: 1, scores: {a: 0.5}}]
                    expect: {halt_at_cycle: null}
                """
            )
        )
        mutated = _mutate(document, path, value)
        suite = tmp_path / "fuzz_test.yaml"
        suite.write_text(yaml.safe_dump(mutated))
        try:
            load_suite(suite)
        except SuiteError as exc:
            problems = exc.problems
        else:
            return
        assert problems


def _mutate(document: Any, path: list[int], value: Any) -> Any:
    if not path:
        return value
    head, *rest = path
    if isinstance(document, dict) and document:
        key = list(document)[head % len(document)]
        return {**document, key: _mutate(document[key], rest, value)}
    if isinstance(document, list) and document:
        i = head % len(document)
        return [*document[:i], _mutate(document[i], rest, value), *document[i + 1 :]]
    return value


class TestSelection:
    @pytest.fixture
    def two_suites(self, tmp_path: Path) -> Path:
        for name in ("alpha", "beta"):
            write_suite(
                tmp_path,
                EVICTABLE
                + """\
                cases:
                  - name: turn may go
                    input: {fixture: evictable}
                    expect: {outcome: allow}
                  - name: plan may go
                    input: {fixture: evictable, patch: {segment: {kind: plan}}}
                    expect: {outcome: allow}
                """,
                name=name,
                file=f"{name}_test.yaml",
            )
        return tmp_path

    @pytest.mark.parametrize(
        ("patterns", "selected"),
        [
            (["turn"], {"alpha/turn may go", "beta/turn may go"}),
            (["BETA/PLAN"], {"beta/plan may go"}),
            (["alpha"], {"alpha/turn may go", "alpha/plan may go"}),
            (["a*/p*"], {"alpha/plan may go"}),
            (["plan*"], {"alpha/plan may go", "beta/plan may go"}),
            (
                ["beta", "alpha/turn*"],
                {"alpha/turn may go", "beta/turn may go", "beta/plan may go"},
            ),
        ],
    )
    def test_filter_by_substring_or_glob(
        self, two_suites: Path, patterns: list[str], selected: set[str]
    ) -> None:
        """--filter keeps the cases whose names match; patterns add up."""
        argv = ["test", str(two_suites), "--format", "json"]
        for pattern in patterns:
            argv += ["--filter", pattern]
        code, out, _ = cli(*argv)
        assert code == 0
        report = json.loads(out)
        got = {f"{s['name']}/{c['name']}" for s in report["suites"] for c in s["cases"]}
        assert got == selected

    def test_filter_matching_nothing_is_a_usage_error(self, two_suites: Path) -> None:
        """No case selected exits 2 rather than passing silently."""
        code, out, err = cli("test", str(two_suites), "--filter", "nothing")
        assert (code, out) == (2, "")
        assert "no case matches --filter 'nothing'" in err

    def test_discovery_is_recursive_and_skips_hidden_folders(self, tmp_path: Path) -> None:
        """Directories are searched for *_test.yaml; hidden folders are not; files are taken
        as given."""
        (tmp_path / "a" / "b").mkdir(parents=True)
        (tmp_path / ".hidden").mkdir()
        for where in ("a/b/x_test.yaml", ".hidden/y_test.yaml", "a/z_test.yml", "a/w.yaml"):
            (tmp_path / where).write_text("")
        assert discover_suites([tmp_path]) == [str(tmp_path / "a" / "b" / "x_test.yaml")]
        assert discover_suites([tmp_path / "a" / "w.yaml", tmp_path / "a" / "w.yaml"]) == [
            str(tmp_path / "a" / "w.yaml")
        ]

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["test", "/nonexistent/place"], "no such file or directory: /nonexistent/place"),
            (["test", "--coverage-threshold", "101", "."], "is not a percentage"),
            (["test", "--format", "xml", "."], "invalid choice: 'xml'"),
        ],
    )
    def test_usage_errors_exit_two(self, argv: list[str], message: str) -> None:
        """Bad paths and options are usage errors."""
        code, _, err = cli(*argv)
        assert code == 2
        assert message in err

    def test_no_suites_found(self, tmp_path: Path) -> None:
        """A folder without suites is a usage error, not a pass."""
        code, _, err = cli("test", str(tmp_path))
        assert code == 2
        assert "no *_test.yaml suite under" in err


class TestSkip:
    def test_skipped_case_is_reported_not_run(self, tmp_path: Path) -> None:
        """A skipped case does not fail, exercises nothing, and says why."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: later
                skip: waiting for the rule that pins plans
                input: {fixture: evictable, patch: {segment: {kind: plan}}}
                expect: {outcome: deny}
              - name: now
                input: {fixture: evictable}
                expect: {outcome: allow}
            """,
        )
        code, out, _ = cli("test", str(tmp_path))
        assert code == 0
        assert "SKIP  later  (skipped: waiting for the rule that pins plans)" in out
        assert "1 passed, 0 failed, 0 errors, 1 skipped" in out
        report = run_files([str(tmp_path / "demo_test.yaml")])
        (coverage,) = report.coverage
        assert coverage.reasons["authorized"] == 1
        assert coverage.reasons["pinned"] == 0

    def test_table_rows_can_skip_individually(self, tmp_path: Path) -> None:
        """skip: ${why} with null in a row runs that row."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: "kind ${k}"
                table:
                  - {k: turn, why: null}
                  - {k: plan, why: not decided}
                skip: "${why}"
                input: {fixture: evictable, patch: {segment: {kind: "${k}"}}}
                expect: {outcome: allow}
            """,
        )
        statuses = [r.status for r in run_suite(load_suite(tmp_path / "demo_test.yaml")).results]
        assert statuses == ["passed", "skipped"]


class TestCoverage:
    def test_reasons_never_exercised_are_listed(self, tmp_path: Path) -> None:
        """The report lists every applicable reason code no case produced."""
        write_suite(
            tmp_path,
            EVICTABLE + ONE_CASE,
        )
        code, out, _ = cli("test", str(tmp_path), "--format", "json")
        assert code == 0
        (coverage,) = json.loads(out)["coverage"]
        assert "pinned" in coverage["never_exercised"]
        assert "authorized" not in coverage["never_exercised"]
        assert len(coverage["never_exercised"]) == 21
        assert coverage["percent"] == round(100 / 22, 2)
        assert set(coverage["not_applicable"]) == {
            "unscored_removal",
            "check_disabled",
            "internal_error",
            "audit_unavailable",
            "pruning_halted",
            "session_state_unavailable",
            "group_member_refused",
            "compaction_recorded",  # a compaction hook's records of its own runs
            "compaction_blocked",
            "compaction_restored",
            "too_few_entries",
            "fact_lost",  # the fidelity codes: the policy has no spec.fidelity
            "negation_lost",
            "meaning_drift",
            "summary_is_error",
            "summary_opaque",
        }

    def test_threshold_fails_below_and_names_the_gaps(self, tmp_path: Path) -> None:
        """--coverage-threshold N exits 4 below N%, listing what was never exercised."""
        write_suite(
            tmp_path,
            EVICTABLE + ONE_CASE,
        )
        code, out, _ = cli("test", str(tmp_path), "--coverage-threshold", "50")
        assert code == 4
        assert "coverage threshold 50%: NOT met (default@1.0.0 at 4.5%)" in out
        assert "never exercised: insufficient_history, spread_healthy," in out
        assert cli("test", str(tmp_path), "--coverage-threshold", "4")[0] == 0

    def test_applicable_codes_follow_the_policy(self, make_policy_text: Any) -> None:
        """A guard that is off gives only check_disabled; switched-off requirements drop their
        codes; fail-closed codes never count."""
        policy = make_policy_text(
            "spec:\n  collapse: {mode: 'off'}\n  eviction: {require_tombstone: false}\n"
        )
        applicable = applicable_reasons(policy)
        assert applicable["check_disabled"] is None
        assert applicable["collapse_detected"] == "the collapse guard is off"
        message = "require_tombstone and transition.require_tombstones are false"
        assert applicable["no_tombstone"] == message
        assert applicable["perturbation_missing"] is None
        assert applicable["internal_error"] is not None
        assert applicable["bound"] is None

    def test_rules_count_and_are_listed_when_never_exercised(self) -> None:
        """A policy's spec.rules are covered by decisions carrying rule:NAME; the others are
        listed and count against the threshold."""
        suite = str(ROOT / "examples" / "policies" / "tests" / "content-pins_test.yaml")
        report = run_files([suite], patterns=["pin-negations*"], coverage_threshold=50)
        (coverage,) = report.coverage
        assert coverage.rules["pin-negations"] > 0
        assert coverage.rules_never_exercised == [
            "pin-definitions",
            "canary-floor",
            "wide-summary",
            "narrow-spread",
        ]
        assert coverage.total == 22 + 5
        assert not report.passed

    def test_expectations_name_only_rules_the_policy_has(self, tmp_path: Path) -> None:
        """rule:NAME in an expectation must be a rule of the policy under test."""
        write_suite(
            tmp_path,
            "cases:\n  - name: a\n    input: {file: doc.json}\n"
            "    expect: {reasons_include: ['rule:pin-negations', 'rule:pin-negation']}\n",
            policy=str(ROOT / "examples" / "policies" / "content-pins.yaml"),
        )
        shutil.copy(EXAMPLES / "eviction-untagged-negation.json", tmp_path / "doc.json")
        (problem,) = problems_of(tmp_path / "demo_test.yaml")
        assert problem.endswith(
            "$.cases[0].expect.reasons_include[1]: content-pins@1.0.1 has no rule 'pin-negation' "
            "(rules: canary-floor, narrow-spread, pin-definitions, pin-negations, wide-summary)"
        )

    def test_rules_of_a_guard_that_is_off_are_not_applicable(self, make_policy_text: Any) -> None:
        """No rule runs under a guard in mode off, so it cannot count against coverage."""
        from prunewarden.suites._coverage import applicable_rules  # noqa: PLC0415

        policy = make_policy_text(
            "spec:\n  eviction: {mode: 'off'}\n  rules:\n"
            "    - {name: a, check: eviction, when: 'score < 0.1', effect: pin, message: m}\n"
            "    - {name: b, check: collapse, when: 'spread < 0.01', effect: warn, message: m}\n"
        )
        assert applicable_rules(policy) == ["b"]

    def test_every_reason_code_has_a_check(self) -> None:
        """The decision schema's descriptions name the check of each reason code."""
        assert set(vocabulary().reasons.values()) == {
            "collapse",
            "eviction",
            "staleness",
            "transition",
            "any",
        }


@pytest.fixture
def make_policy_text() -> Any:
    from prunewarden import parse_policy  # noqa: PLC0415

    def build(spec: str) -> Any:
        return parse_policy(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: t, version: 1.0.0}\n" + spec
        )

    return build


class TestReports:
    @pytest.fixture
    def mixed(self, tmp_path: Path) -> Path:
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: passes
                input: {fixture: evictable}
                expect: {outcome: allow}
              - name: "fails <&> \\x01"
                input: {fixture: evictable}
                expect: {outcome: deny}
              - name: skipped
                skip: later
                input: {fixture: evictable}
                expect: {outcome: deny}
            """,
        )
        write_suite(
            tmp_path,
            "cases:\n  - name: a\n    input: {check: eviction}\n    expect: {outcome: maybe}\n",
            file="bad_test.yaml",
        )
        return tmp_path

    def test_junit_is_valid_and_counts_add_up(self, mixed: Path) -> None:
        """testsuites/testsuite/testcase with failure, error and skipped, and matching counts."""
        code, out, _ = cli("test", str(mixed), "--format", "junit")
        assert code == 3
        root = ET.fromstring(out)  # noqa: S314 - our own output
        assert root.tag == "testsuites"
        suites = root.findall("testsuite")
        assert [s.get("name") for s in suites] == ["demo", str(mixed / "bad_test.yaml")]
        demo, bad = suites
        assert (demo.get("tests"), demo.get("failures"), demo.get("skipped")) == ("3", "1", "1")
        cases = demo.findall("testcase")
        assert [c.get("classname") for c in cases] == ["demo"] * 3
        assert all(float(c.get("time", "x")) >= 0 for c in cases)
        failure = cases[1].find("failure")
        assert failure is not None
        assert cases[1].get("name") == "fails <&> \ufffd"
        assert failure.get("message", "").startswith('outcome: expected "deny", got "allow"')
        assert cases[1].get("line") == "16"
        assert cases[2].find("skipped") is not None
        error = bad.find("testcase/error")
        assert error is not None
        assert "'maybe' is not one of" in (error.text or "")
        assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "1")
        assert root.get("skipped") == "1"

    def test_junit_carries_the_policy_and_coverage(self, tmp_path: Path) -> None:
        """Properties name the policy; a coverage threshold adds a coverage testsuite."""
        write_suite(
            tmp_path,
            EVICTABLE + ONE_CASE,
        )
        report = run_files([str(tmp_path / "demo_test.yaml")], coverage_threshold=90)
        root = ET.fromstring(render_junit(report))  # noqa: S314 - our own output
        properties = {p.get("name"): p.get("value") for p in root.iter("property")}
        assert properties["policy"] == "default@1.0.0"
        assert properties["policy_digest"] == load_builtin_policy().digest
        coverage = root.find("testsuite[@name='coverage']")
        assert coverage is not None
        failure = coverage.find("testcase/failure")
        assert failure is not None
        assert "pinned" in (failure.text or "")
        assert root.get("failures") == "1"

    def test_junit_xml_file_beside_the_pretty_report(self, mixed: Path, tmp_path: Path) -> None:
        """--junit-xml writes the XML report to a file while stdout keeps the chosen format."""
        target = tmp_path / "out" / "junit.xml"
        target.parent.mkdir()
        _, out, _ = cli("test", str(mixed / "demo_test.yaml"), "--junit-xml", str(target))
        assert "FAIL  fails" in out
        assert ET.parse(target).getroot().get("failures") == "1"  # noqa: S314

    def test_json_report_matches_the_run(self, mixed: Path) -> None:
        """The JSON report has the summary, each case's status and mismatches, and problems."""
        code, out, _ = cli("test", str(mixed), "--format", "json")
        report = json.loads(out)
        assert report["summary"] | {"seconds": 0} == {
            "suites": 1,
            "cases": 3,
            "passed": 1,
            "failed": 1,
            "errors": 0,
            "skipped": 1,
            "invalid_suites": 1,
            "seconds": 0,
            "coverage_threshold": None,
            "exit_status": code,
        }
        failed = report["suites"][0]["cases"][1]
        assert failed["mismatches"] == [
            {
                "field": "outcome",
                "expected": "deny",
                "got": "allow",
                "message": failed["mismatches"][0]["message"],
            }
        ]
        assert failed["decision"]["reasons"] == ["authorized"]
        (invalid,) = report["invalid"]
        assert invalid["problems"][0]["line"] == 8

    def test_a_broken_case_is_an_error_not_a_crash(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An exception while running one case marks it error (exit 4); the others run."""
        write_suite(
            tmp_path,
            EVICTABLE
            + """\
            cases:
              - name: breaks
                input: {fixture: evictable, patch: {segment: {kind: plan}}}
                expect: {outcome: allow}
              - name: runs
                input: {fixture: evictable}
                expect: {outcome: allow}
            """,
        )
        suite = load_suite(tmp_path / "demo_test.yaml")
        engine = quiet_engine(suite.policy)
        real = engine.evaluate

        def flaky(document: Any, **kwargs: Any) -> Decision:
            if document["segment"]["kind"] == "plan":
                msg = "disk on fire"
                raise OSError(msg)
            return real(document, **kwargs)

        monkeypatch.setattr(engine, "evaluate", flaky)
        broken, fine = run_suite(suite, engine).results
        assert (broken.status, broken.error) == ("error", "OSError: disk on fire")
        assert fine.status == "passed"


class TestSchema:
    def test_suite_schema_is_valid_and_accepts_the_shipped_suites(self) -> None:
        """test-suite.v1 is a valid Draft 2020-12 schema and the shipped suites satisfy it."""
        suite_schema = schema("test-suite")
        Draft202012Validator.check_schema(suite_schema)
        validator = Draft202012Validator(suite_schema)
        for folder in SHIPPED:
            for path in folder.rglob("*_test.yaml"):
                validator.validate(yaml.safe_load(path.read_text()))

    def test_shipped_suites_stay_out_of_the_policy_globs(self) -> None:
        """make demo validates policies/*.yaml and examples/policies/*.yaml; no suite is there."""
        for folder in SHIPPED:
            assert not list(folder.glob("*_test.yaml"))
            assert list(folder.rglob("*_test.yaml"))

    def test_suites_run_from_a_copy_elsewhere(self, tmp_path: Path) -> None:
        """Paths in a suite are relative to the suite file, not to the working directory."""
        # Without the Node example's installed packages (a link into clients/typescript).
        ignored = shutil.ignore_patterns("node_modules")
        shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=ignored)
        code, out, _ = cli("test", str(tmp_path / "examples"))
        assert code == 0, out

    def test_schema_command_prints_the_suite_schema(self) -> None:
        """prunewarden schema test-suite prints the bundled schema."""
        code, out, _ = cli("schema", "test-suite")
        assert code == 0
        assert json.loads(out)["title"] == "prunewarden test suite v1"
