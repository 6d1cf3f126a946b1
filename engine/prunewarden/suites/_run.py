"""Running policy test suites: every case evaluated, its decision compared with what it expects.

A run evaluates every case of a loaded suite and never stops on one: a case whose evaluation
raises is an ``error`` and the others still run, so that one report says everything about a
policy change.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.policy import Policy
from prunewarden.suites._expectations import EXPECTATIONS, Mismatch, Observed
from prunewarden.suites._load import Case, Suite

Status = Literal["passed", "failed", "error", "skipped"]


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: Case
    status: Status
    seconds: float = 0.0
    mismatches: tuple[Mismatch, ...] = ()
    decision: Decision | None = None
    error: str = ""

    @property
    def message(self) -> str:
        """One line saying why the case did not pass (empty when it did)."""
        if self.status == "failed":
            return str(self.mismatches[0])
        if self.status == "skipped":
            return self.case.skip or ""
        return self.error


@dataclass(frozen=True, slots=True)
class SuiteResult:
    suite: Suite
    results: tuple[CaseResult, ...]

    @property
    def seconds(self) -> float:
        return sum(result.seconds for result in self.results)

    def count(self, status: Status) -> int:
        return sum(1 for result in self.results if result.status == status)


class _Quiet:
    """Decisions made by test cases are not audit records: nothing is logged."""

    def info(self, event: str, **fields: Any) -> None:
        pass


def quiet_engine(policy: Policy) -> Engine:
    """An engine for running cases: it logs nothing."""
    return Engine(policy, logger=_Quiet())


def select(suites: Sequence[Suite], patterns: Sequence[str]) -> list[Suite]:
    """The suites with only the cases matching one of ``patterns`` (all cases when none).

    A pattern with ``*``, ``?`` or ``[`` is a glob matched against the suite name, the case
    name, or ``SUITE/CASE``; any other pattern is a substring of ``SUITE/CASE``. Matching
    ignores case. Suites left without cases are dropped.
    """
    if not patterns:
        return list(suites)
    chosen = []
    for suite in suites:
        cases = tuple(c for c in suite.cases if _matches(suite.name, c.name, patterns))
        if cases:
            chosen.append(Suite(suite.name, suite.file, suite.policy, suite.policy_source, cases))
    return chosen


def _matches(suite: str, case: str, patterns: Sequence[str]) -> bool:
    full = f"{suite}/{case}".casefold()
    for pattern in patterns:
        wanted = pattern.casefold()
        if any(ch in wanted for ch in "*?["):
            names = (suite.casefold(), case.casefold(), full)
            if any(fnmatch.fnmatchcase(name, wanted) for name in names):
                return True
        elif wanted in full:
            return True
    return False


def run_suite(suite: Suite, engine: Engine | None = None) -> SuiteResult:
    """Run every case of ``suite``; never raises for a case (a broken case is an ``error``)."""
    engine = engine if engine is not None else quiet_engine(suite.policy)
    return SuiteResult(suite, tuple(run_case(case, engine) for case in suite.cases))


def run_case(case: Case, engine: Engine) -> CaseResult:
    if case.skip:
        return CaseResult(case, "skipped")
    start = time.perf_counter()
    try:
        decision = engine.evaluate(case.document)
        seen = Observed(engine, case.document, decision)
        mismatches = tuple(
            found
            for name, check in EXPECTATIONS.items()
            if name in case.expect and (found := check(case.expect[name], seen)) is not None
        )
    except Exception as exc:  # noqa: BLE001 - one broken case must not stop the run
        seconds = time.perf_counter() - start
        return CaseResult(case, "error", seconds, error=f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    status: Status = "failed" if mismatches else "passed"
    return CaseResult(case, status, seconds, mismatches, decision)
