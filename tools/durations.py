"""The time of a pytest run by folder of tests/, from its JUnit XML report: the table of
docs/dev/testing.md ("Where the time goes").

    .venv/bin/python -m pytest -n 2 --dist loadgroup --junitxml=/tmp/suite.xml
    python tools/durations.py /tmp/suite.xml

Each test's time is pytest's: set-up, call and tear-down together (a fixture a module shares is
counted in its first test). Folders are the first level under tests/; the files directly in
tests/ are grouped by name (``test_docs*.py`` as ``test_docs*``, the rest as ``tests/*.py``).
Standard library only.
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


def by_folder(report: Path) -> dict[str, tuple[int, float]]:
    """Each row's count of tests run (not skipped) and their seconds."""
    rows: dict[str, list[float]] = defaultdict(list)
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 - pytest's own file
        if case.find("skipped") is not None:
            continue
        rows[folder_of(case.get("classname", ""))].append(float(case.get("time", "0")))
    return {name: (len(times), sum(times)) for name, times in rows.items()}


def render(rows: dict[str, tuple[int, float]], out: TextIO) -> None:
    """A Markdown table, the most expensive row first, with the total last."""
    total = sum(seconds for _, seconds in rows.values())
    out.write("| folder | tests | seconds | share |\n|---|---:|---:|---:|\n")
    ranked = sorted(rows.items(), key=lambda row: -row[1][1])
    out.writelines(
        f"| `{name}` | {count} | {seconds:.0f} | {seconds / total:.0%} |\n"
        for name, (count, seconds) in ranked
    )
    count = sum(n for n, _ in rows.values())
    out.write(f"| all | {count} | {total:.0f} | 100% |\n")


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python tools/durations.py", description=__doc__)
    parser.add_argument("report", type=Path, help="pytest's --junitxml file")
    args = parser.parse_args(argv)
    render(by_folder(args.report), out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
