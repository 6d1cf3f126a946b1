"""CHANGELOG.md is written for the people who upgrade: an [Unreleased] section first, dated
release sections after it, entries grouped by ring, short, each naming what it touches, none
citing a timing, a ratio or a test; and the newest release is the package's version."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from prunewarden.__about__ import __version__

CHANGELOG = Path(__file__).resolve().parent.parent / "CHANGELOG.md"
RINGS = ["Core", "Service", "Tools", "Adapters"]
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d\d-\d\d)$")
#: What an entry for users does not cite: timings, ratios, shares, speed, benchmarks, tests.
FIGURES = [
    re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|seconds?|minutes?|hours?)\b"),
    re.compile(r"\b\d+(?:\.\d+)?\s?x\b"),
    re.compile(r"%"),
    re.compile(r"\b(?:faster|slower|speed-?up|benchmark(?:s|ed)?|p50|p99|median)\b", re.IGNORECASE),
    re.compile(r"\btests?/|\btest_\w+|\b(?:a|the|new) tests?\b|\btested\b", re.IGNORECASE),
]


def sections(text: str) -> list[tuple[str, dict[str, list[str]]]]:
    """Each ``## `` section (its heading) with its ``### `` groups and their entries, an entry
    being its lines joined by single spaces."""
    found: list[tuple[str, dict[str, list[str]]]] = []
    for block in re.split(r"^(?=## )", text, flags=re.MULTILINE)[1:]:
        heading, _, body = block.partition("\n")
        groups: dict[str, list[str]] = {}
        for group in re.split(r"^(?=### )", body, flags=re.MULTILINE)[1:]:
            name, _, entries = group.partition("\n")
            groups[name.removeprefix("### ")] = [
                " ".join(entry.split())
                for entry in re.split(r"^- ", entries, flags=re.MULTILINE)[1:]
            ]
        found.append((heading, groups))
    return found


def raw_entries(text: str) -> list[list[str]]:
    """Every entry of the file as the lines it is written on: a ``- `` line and the indented
    lines that follow it."""
    entries: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("- "):
            current = [line]
            entries.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            current.append(line)
        else:
            current = None
    return entries


TEXT = CHANGELOG.read_text(encoding="utf-8")
ENTRIES = [
    (heading, group, entry)
    for heading, groups in sections(TEXT)
    for group, listed in groups.items()
    for entry in listed
]


def test_unreleased_comes_first_with_a_group_per_ring() -> None:
    """Later changes go under [Unreleased], at the top, by ring."""
    heading, groups = sections(TEXT)[0]
    assert heading == "## [Unreleased]"
    assert list(groups) == RINGS


def test_releases_are_dated_and_grouped_by_ring() -> None:
    """Every other section is a release with its date, newest first, its groups the rings."""
    releases = sections(TEXT)[1:]
    assert releases
    dated = [RELEASE.match(heading) for heading, _ in releases]
    assert all(dated), [heading for heading, _ in releases]
    versions = [tuple(int(part) for part in m[1].split(".")) for m in dated if m]
    assert versions == sorted(versions, reverse=True)
    for _, groups in releases:
        assert [ring for ring in RINGS if ring in groups] == list(groups)


def test_the_newest_release_is_the_package_version() -> None:
    """``prunewarden.__about__.__version__`` and the newest release section agree."""
    match = RELEASE.match(sections(TEXT)[1][0])
    assert match is not None
    assert match[1] == __version__


def test_entries_are_at_most_three_lines() -> None:
    assert [entry[0] for entry in raw_entries(TEXT) if len(entry) > 3] == []


def test_entries_are_short() -> None:
    """The median entry of each release is at most 180 characters."""
    for heading, groups in sections(TEXT)[1:]:
        lengths = [len(entry) for listed in groups.values() for entry in listed]
        assert statistics.median(lengths) <= 180, heading


def test_every_entry_names_what_it_touches() -> None:
    """An entry names the API, command, option or file it is about (in backquotes)."""
    assert [entry for _, _, entry in ENTRIES if "`" not in entry] == []


@pytest.mark.parametrize("pattern", FIGURES, ids=lambda p: p.pattern[:24])
def test_no_entry_cites_a_figure_a_timing_or_a_test(pattern: re.Pattern[str]) -> None:
    """How a change was measured and tested is in its commit message and docs/dev/."""
    assert [entry for _, _, entry in ENTRIES if pattern.search(entry)] == []


def test_the_shape_check_sees_what_it_refuses() -> None:
    """The patterns catch what the old [Unreleased] section was full of."""
    cited = [
        "a pass took 29 s, now 0.75 s",
        "(target 4x)",
        "a median 1.06x",
        "100% reason coverage",
        "tested with the real pre-commit",
        "`tests/test_docs.py` runs",
    ]
    assert all(any(p.search(text) for p in FIGURES) for text in cited)
    assert not any(p.search("`prunewarden test --junit-xml`, `test-suite`") for p in FIGURES)
