"""The time of a pytest run by folder of tests/, from its JUnit XML report: the table of
docs/dev/testing.md ("Where the time goes").

    .venv/bin/python -m pytest -n 2 --dist loadgroup --junitxml=/tmp/suite.xml
    python tools/durations.py /tmp/suite.xml

Each test's time is pytest's: set-up, call and tear-down together (a fixture a module shares is
counted in its first test). Its CPU seconds, when the report has them (the ``cpu_seconds``
property of tests/_support/cpu_time.py), are those of its worker and of the processes it waited
for: on a shared machine they say what the suite costs, where wall time says how busy the
machine was; the share is then of CPU seconds. Folders are the first level under tests/; the
files directly in tests/ are grouped by name (``test_docs*.py`` as ``test_docs*``, the rest as
``tests/*.py``). Standard library only.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

#: Files of tests/ itself given a row of their own: the largest costs among them.
OWN_ROWS = ("test_docs", "test_benchmarks", "test_reload_bundle", "test_wheel")


def folder_of(classname: str) -> str:
    """The row of a test, from its JUnit class name (``tests.server.test_http.TestX``)."""
    parts = classname.split(".")
    if parts and parts[0] == "tests":
        parts = parts[1:]
    if len(parts) > 1 and not parts[0].startswith("test_"):
        return f"tests/{parts[0]}/"
    module = parts[0] if parts else "?"
    for prefix in OWN_ROWS:
        if module.startswith(prefix):
            return f"tests/{prefix}*.py"
    return "tests/*.py (the rest)"


def by_folder(report: Path) -> dict[str, tuple[int, float, float | None]]:
    """Each row's count of tests run (not skipped), their seconds and their CPU seconds (None
    when the report has none)."""
    rows: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 - pytest's own file
        if case.find("skipped") is not None:
            continue
        cpu = next(
            (
                float(prop.get("value", "0"))
                for prop in case.iter("property")
                if prop.get("name") == "cpu_seconds"
            ),
            None,
        )
        rows[folder_of(case.get("classname", ""))].append((float(case.get("time", "0")), cpu))
    return {
        name: (
            len(tests),
            sum(seconds for seconds, _ in tests),
            None if any(cpu is None for _, cpu in tests) else sum(cpu or 0 for _, cpu in tests),
        )
        for name, tests in rows.items()
    }


def render(rows: dict[str, tuple[int, float, float | None]], out: TextIO) -> None:
    """A Markdown table, the most expensive row first, with the total last."""
    with_cpu = all(cpu is not None for _, _, cpu in rows.values())

    def cost(row: tuple[int, float, float | None]) -> float:
        return (row[2] or 0.0) if with_cpu else row[1]

    total = sum(cost(row) for row in rows.values()) or 1.0
    count = sum(row[0] for row in rows.values())
    seconds = sum(row[1] for row in rows.values())
    if with_cpu:
        out.write("| folder | tests | seconds | CPU seconds | share |\n|---|---:|---:|---:|---:|\n")
    else:
        out.write("| folder | tests | seconds | share |\n|---|---:|---:|---:|\n")
    for name, row in sorted(rows.items(), key=lambda item: -cost(item[1])):
        cpu = f" {row[2]:.0f} |" if with_cpu else ""
        out.write(f"| `{name}` | {row[0]} | {row[1]:.0f} |{cpu} {cost(row) / total:.0%} |\n")
    cpu = f" {total:.0f} |" if with_cpu else ""
    out.write(f"| all | {count} | {seconds:.0f} |{cpu} 100% |\n")


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python tools/durations.py", description=__doc__)
    parser.add_argument("report", type=Path, help="pytest's --junitxml file")
    args = parser.parse_args(argv)
    render(by_folder(args.report), out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
