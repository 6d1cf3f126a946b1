"""A pytest plugin: each test's CPU seconds, as the JUnit report's ``cpu_seconds`` property.

On a shared machine a test's wall time says more about the other work beside it than about the
test; its CPU time does not. Counted from the start of its set-up to the end of its tear-down:
the worker process's own CPU time (every thread) and that of the child processes it waited for
(a server stopped, a command run), so a fixture that a module shares counts in its first test.
``tools/durations.py`` sums the property by folder (docs/dev/testing.md, "Where the time goes").
"""

from __future__ import annotations

import resource
import time
from collections.abc import Generator

import pytest

PROPERTY = "cpu_seconds"
_STARTED = pytest.StashKey[float]()


def cpu_seconds() -> float:
    """This process's CPU time and that of its waited-for children, user and system."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    item.stash[_STARTED] = cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # The tear-down report carries the properties into the JUnit report: set them before it.
    if call.when == "teardown" and _STARTED in item.stash:
        spent = cpu_seconds() - item.stash[_STARTED]
        item.user_properties.append((PROPERTY, f"{spent:.3f}"))
    return (yield)
