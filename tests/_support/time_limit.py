"""A pytest plugin: any test whose call lasts longer than the limit fails the run, named.

The limit (``test_time_limit`` in pyproject.toml's pytest options, seconds) is far above what a
test of ``make test`` takes on a loaded machine; a test over it is a test to shorten, or to move
behind the ``slow`` marker that only ``make fuzz`` runs. Tests marked ``slow`` are exempt, and a limit of 0 times nothing (``make fuzz``, whose budgets are fifty times larger).
Only the call is timed, not the set-up of fixtures shared by a module or a session.
"""

from __future__ import annotations

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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    limit = float(item.config.getini("test_time_limit"))
    if (
        report.when == "call"
        and limit > 0
        and report.passed
        and report.duration > limit
        and item.get_closest_marker("slow") is None
    ):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} passed but took {report.duration:.1f} s, over the {limit:g} s a "
            "test may take (docs/testing.md: shorten it, or mark it slow for make fuzz)"
        )
    return report
