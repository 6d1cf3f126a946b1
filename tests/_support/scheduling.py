"""How ``make test``'s two workers share the suite: a file's tests on one worker, the longest
files first (a pytest-xdist scheduler, chosen under ``--dist loadgroup``).

pytest-xdist's own ``loadgroup`` tells a group by the ``@group`` suffix it writes into each
test's node id on the workers; pytest 9 keeps a node id in a structure that suffix no longer
reaches, so every test came to the controller as its own group, and the fixture a module shares
(a server, a wheel, the fleet demo) was made on both workers, often more than once. This
scheduler needs no suffix: a test's group is its file, or the explicit group of
``CROSS_FILE_GROUPS`` (the files whose ``xdist_group`` mark joins them;
a mark this table does not know stops the run at collection, naming the file). A suffix, should
pytest-xdist write one again, still wins.

A group goes to one worker whole, in the order of ``LONGEST_FIRST`` (the files that cost most,
measured), then the rest by number of tests: a long file left to the end would keep one worker
busy while the other waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

#: Files that share something across files (a source tree being built, a port): one group each.
CROSS_FILE_GROUPS = {
    "tests/test_wheel.py": "source-tree",
    "tests/ci/test_precommit_hooks.py": "source-tree",
    "tests/test_editable.py": "source-tree",
}

#: The groups that cost most, in CPU seconds on their worker (docs/dev/testing.md, "Where the time
#: goes"), costliest first; a group not named here follows them, the groups of more tests first.
LONGEST_FIRST = (
    "tests/test_docs.py",
    "tests/test_docs_snippets.py",
    "source-tree",
    "tests/replay/test_dask.py",
    "tests/test_docs_python.py",
    "tests/server/test_tenants.py",
    "tests/test_fuzz.py",
    "tests/plots/test_plots.py",
    "tests/server/test_openapi.py",
    "tests/server/test_durable_sessions.py",
    "tests/test_benchmarks.py",
    "tests/rules/test_backends.py",
    "tests/mutation/test_runner.py",
    "tests/server/test_fleet_demo.py",
    "tests/audit/test_log_concurrency.py",
)


def group_of(nodeid: str) -> str:
    """The group of a test: the suffix pytest-xdist wrote, else its file's group or file."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[-1]
    path = nodeid.split("::", 1)[0]
    return CROSS_FILE_GROUPS.get(path, path)


def rank(group: str, tests: int) -> tuple[int, int]:
    """The order in which groups are handed out: ``LONGEST_FIRST``, then by number of tests."""
    if group in LONGEST_FIRST:
        return (LONGEST_FIRST.index(group), 0)
    return (len(LONGEST_FIRST), -tests)


class FileGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``LoadScopeScheduling`` over the groups of ``group_of``, in the order of ``rank``."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        # The next group handed out is the first by rank, not the first collected.
        best = min(self.workqueue, key=lambda group: rank(group, len(self.workqueue[group])))
        self.workqueue.move_to_end(best, last=False)
        super()._assign_work_unit(node)


def misplaced(items: Iterable[pytest.Item]) -> list[str]:
    """The tests whose ``xdist_group`` mark names a group this scheduler would not give them."""
    return sorted(
        {
            f"{item.nodeid.split('::', 1)[0]}: xdist_group({name!r}) is not in "
            "CROSS_FILE_GROUPS (tests/_support/scheduling.py)"
            for item in items
            for mark in item.iter_markers("xdist_group")
            if (name := str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")))
            != group_of(item.nodeid)
        }
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A group mark the scheduler would not honour is an error, not a silent split."""
    if problems := misplaced(items):
        raise pytest.UsageError("\n".join(problems))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> FileGroupScheduling | None:
    """Under ``--dist loadgroup``, this scheduler in place of pytest-xdist's."""
    if config.getoption("dist") != "loadgroup":
        return None
    return FileGroupScheduling(config, log)
