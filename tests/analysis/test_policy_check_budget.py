"""``policy check --timeout``: every check of one policy shares a total budget beside each
query's own 5 s; a check the budget does not reach is a ``not-reached`` finding naming it, in
the text, JSON and SARIF reports, and the run exits 4 (1 when an error was found anyway)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from prunewarden.analysis import check_policies, exit_code
from prunewarden.cli._main import run

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "policies" / "default.yaml")
LOOSE = str(ROOT / "examples" / "policies" / "loose-candidate.yaml")
PINS = str(ROOT / "examples" / "policies" / "content-pins.yaml")
# Far below what any check takes: the budget is spent before the first query.
SPENT = "1e-9"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def stopped_after(queries: int) -> Callable[[], float]:
    """A clock that stands still for the budget's start and ``queries`` queries, then jumps an
    hour: the budget runs out exactly there, whatever the machine's speed."""
    calls = [0]

    def clock() -> float:
        calls[0] += 1
        # One reading starts the budget; each query reads it once as it starts (and again
        # only when the solver gives up, which none of these queries does).
        return 0.0 if calls[0] <= 1 + queries else 3600.0

    return clock


class TestBudget:
    def test_a_spent_budget_names_every_check_it_did_not_reach(self) -> None:
        """The rules' checks and both comparisons are named; the checks that need no solver
        (thresholds, pinned kinds, settings not modelled) are still reported."""
        findings = check_policies([PINS], DEFAULT, clock=stopped_after(0))
        missed = [f.message for f in findings if f.code == "not-reached"]
        rules = [m for m in missed if m.startswith("whether rule")]
        assert len(rules) == 3  # content-pins has three rules
        said = "\n".join(missed)
        assert f"whether {PINS} allows an eviction that {DEFAULT} refuses was not reached" in said
        assert f"whether {PINS} refuses an eviction that {DEFAULT} allows was not reached" in said
        assert all(m.endswith("the total budget of 60 s ran out") for m in missed)
        assert exit_code(findings) == 4

    def test_an_error_found_before_the_budget_ran_out_still_exits_1(self) -> None:
        """The loosened candidate's thresholds and its eviction comparison (three queries) are
        reached; neither direction of the collapse comparison is, and the eviction error
        decides the exit code."""
        findings = check_policies([LOOSE], DEFAULT, clock=stopped_after(3))
        codes = [f.code for f in findings]
        assert codes.count("overlay-more-permissive") == 1
        assert "threshold-outside-seed-range" in codes
        missed = [f for f in findings if f.code == "not-reached"]
        assert [f.message.split(" over a history")[0] for f in missed] == [
            f"whether {LOOSE} lets pruning go on",
            f"whether {LOOSE} halts",
        ]
        assert {f.locations[0].pointer for f in missed} == {"/spec/collapse/spread_floor"}
        assert exit_code(findings) == 1

    def test_a_budget_that_suffices_reaches_everything(self) -> None:
        findings = check_policies([LOOSE], DEFAULT, timeout=60)
        assert "not-reached" not in {f.code for f in findings}
        assert exit_code(findings) == 1


class TestReports:
    def test_text(self) -> None:
        code, out, _ = cli("policy", "check", "--timeout", SPENT, "--against", DEFAULT, PINS)
        assert code == 4
        assert f"warning not-reached: whether {PINS} allows an eviction that" in out
        assert out.rstrip().endswith(
            "check(s) not reached within the time budget: the report is partial"
        )

    def test_json(self) -> None:
        argv = ("--format", "json", "--timeout", SPENT, "--against", DEFAULT, PINS)
        code, out, _ = cli("policy", "check", *argv)
        report = json.loads(out)
        assert code == 4
        assert report["timeout"] == 1e-9
        assert report["not_reached"]
        assert all(f["code"] == "not-reached" for f in report["not_reached"])
        assert report["summary"]["warning"] >= len(report["not_reached"])

    def test_sarif(self) -> None:
        argv = ("--format", "sarif", "--timeout", SPENT, "--against", DEFAULT, PINS)
        code, out, _ = cli("policy", "check", *argv)
        (sarif_run,) = json.loads(out)["runs"]
        assert code == 4
        (invocation,) = sarif_run["invocations"]
        assert invocation["executionSuccessful"] is False
        assert invocation["toolExecutionNotifications"]
        assert "not-reached" in {result["ruleId"] for result in sarif_run["results"]}

    def test_a_complete_sarif_run_is_successful(self) -> None:
        code, out, _ = cli("policy", "check", "--format", "sarif", DEFAULT)
        assert code == 0
        (sarif_run,) = json.loads(out)["runs"]
        assert sarif_run["invocations"] == [{"executionSuccessful": True}]

    @pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "soon"])
    def test_a_timeout_that_is_no_duration_is_a_usage_error(self, value: str) -> None:
        code, _, err = cli("policy", "check", "--timeout", value, DEFAULT)
        assert code == 2
        assert "--timeout" in err
        assert "a positive number of seconds" in err
