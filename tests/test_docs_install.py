"""Until a package is published, an install line in the docs installs from a checkout of this
repository (``pip install -e '.[EXTRA]'``) or from a built wheel, never from an index that has
no prunewarden yet."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
_PIP = re.compile(r"^\s*(?:\$ )?pip install (.*)$")
_FROM_CHECKOUT = re.compile(r"-e '\.(\[[a-z0-9,-]+\])?'|'dist/prunewarden-\*\.whl")


def install_lines(page: Path) -> list[tuple[int, str]]:
    """Each ``pip install`` line of the page's code blocks, naming prunewarden or an extra."""
    found, in_block = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("```"):
            in_block = not in_block
            continue
        match = _PIP.match(line) if in_block else None
        if match is not None and ("prunewarden" in line or "'.[" in line):
            found.append((number, match.group(1)))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_install_lines_install_from_a_checkout(page: Path) -> None:
    """Every install of prunewarden in a code block is from a checkout or a built wheel."""
    wrong = [
        f"{page.name}:{number}: pip install {rest}"
        for number, rest in install_lines(page)
        if not _FROM_CHECKOUT.search(rest)
    ]
    assert wrong == []


def test_the_pages_show_install_lines() -> None:
    """The check reads the install lines there are (server.md's, among others)."""
    assert install_lines(ROOT / "docs" / "server.md")
