"""A pytest plugin: any test whose call lasts longer than the limit fails the run, named.

The limit (``test_time_limit`` in pyproject.toml's pytest options, seconds) is far above what a
test of ``make test`` takes; a test over it is a test to shorten, or to move behind the ``slow``
marker that only ``make fuzz`` runs. Tests marked ``slow`` are exempt, and a limit of 0 times
nothing (``make fuzz``, whose budgets are fifty times larger). Only the call is timed, not the
set-up of fixtures shared by a module or a session.

The limit holds as written on a machine no busier than its cores (the suite's own two workers
load two cores). On a busier one every test is slowed alike, so the limit grows with the
one-minute load average per core (``test_time_limit_scales_with_load``): a healthy test does
not fail because the machine is shared, and a test ten times too long still does.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

DEFAULT_LIMIT_S = 30.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "test_time_limit",
        "seconds one test's call may last before it fails the run (0: no limit; slow tests "
        "are exempt)",
        default=str(DEFAULT_LIMIT_S),
    )
    parser.addini(
        "test_time_limit_scales_with_load",
        "grow the limit with the load average per core, when it is above 1",
        type="bool",
        default=True,
    )


def limit_under_load(limit: float, load: float, cores: int) -> float:
    """``limit`` on a machine whose one-minute load average is ``load`` over ``cores``."""
    return limit * max(1.0, load / max(cores, 1))


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    limit = float(item.config.getini("test_time_limit"))
    if (
        report.when != "call"
        or limit <= 0
        or not report.passed
        or item.get_closest_marker("slow") is not None
        or report.duration <= limit
    ):
        return report
    load, cores = _load(), os.cpu_count() or 1
    if item.config.getini("test_time_limit_scales_with_load"):
        limit = limit_under_load(limit, load, cores)
    if report.duration > limit:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} passed but took {report.duration:.1f} s, over the {limit:g} s a "
            f"test may take (load average {load:.1f} on {cores} cores; docs/dev/testing.md: "
            "shorten it, or mark it slow for make fuzz)"
        )
    return report
