"""Every relative link of README.md and docs/ leads somewhere: the file it names exists, and
the heading its ``#anchor`` names is on that page (as GitHub makes anchors of headings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)


def pages() -> list[str]:
    """README.md, CHANGELOG.md, every page under docs/ and the TypeScript client's README."""
    found = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return ["README.md", "CHANGELOG.md", "clients/typescript/README.md", *found]


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {anchor(heading) for heading in HEADING.findall(text)}


def broken_links(page: str) -> list[str]:
    path = ROOT / page
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, fragment = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment}")
    return broken


@pytest.mark.parametrize("page", pages())
def test_every_relative_link_resolves(page: str) -> None:
    """A link names a file that exists and, for a page, a heading it has."""
    assert broken_links(page) == []


def test_the_anchor_is_githubs() -> None:
    """Headings become anchors as GitHub makes them."""
    assert anchor("Running the suite: `make test` and `make fuzz`") == (
        "running-the-suite-make-test-and-make-fuzz"
    )
    assert anchor("`prunewarden doctor`") == "prunewarden-doctor"
