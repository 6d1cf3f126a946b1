"""Every Python block of README.md and docs/ runs as written, or says on the line before it
why not (``_Not run by the tests: REASON._``, as tests/test_docs.py asks of shell blocks).

A page's blocks run in order in one namespace in a fresh interpreter, in a temporary folder
holding copies of examples/ and policies/, after the page's stand-ins for what the reader
supplies and before its checks (tests/_support/doc_pages.py). docs/integrations.md and the
client snippet of docs/server.md are run by tests/test_docs_snippets.py (against the agent
frameworks and a real server).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _support.doc_pages import PAGES

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(
    r"^(?P<before>[^\n]*)\n\n?```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL
)
ILLUSTRATIVE = re.compile(r"^_Not run by the tests: .+\._$")  # as tests/test_docs.py
# Blocks run by tests/test_docs_snippets.py: page -> a text each of those blocks holds.
RUN_ELSEWHERE = {"docs/integrations.md": "", "docs/server.md": "Client("}


def python_blocks(page: str) -> list[tuple[str, bool]]:
    """(body, marked illustrative) of every Python block of ``page``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [
        (m["body"], bool(ILLUSTRATIVE.match(m["before"])))
        for m in BLOCK.finditer(text)
        if m["lang"] == "python"
    ]


def pages_with_python() -> list[str]:
    """README.md and the pages of docs/ that hold a Python block."""
    pages = ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]
    return [page for page in pages if python_blocks(page)]


def run_elsewhere(page: str, body: str) -> bool:
    """Whether tests/test_docs_snippets.py runs this block."""
    return page in RUN_ELSEWHERE and RUN_ELSEWHERE[page] in body


def runnable(page: str) -> list[str]:
    """The Python blocks of ``page`` this file runs: neither illustrative nor run elsewhere."""
    return [
        body
        for body, illustrative in python_blocks(page)
        if not illustrative and not run_elsewhere(page, body)
    ]


def run_page(page: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    """The page's prelude, its runnable blocks in order and its epilogue, in one interpreter."""
    run = PAGES[page]
    for folder in ("examples", "policies"):
        # Without the Node example's installed packages (a link into clients/typescript).
        ignored = shutil.ignore_patterns("node_modules")
        shutil.copytree(ROOT / folder, workdir / folder, ignore=ignored)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRUNEWARDEN_", "OPENAI_"))}
    env.update(run.environment)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    sources = [run.prelude]
    for index, block in enumerate(runnable(page)):
        sources += [run.between.get(index, ""), block]
    return subprocess.run(
        [sys.executable, "-m", "_support.doc_runner"],
        input=json.dumps([*sources, run.epilogue]),
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class TestPythonBlocks:
    @pytest.mark.parametrize("page", pages_with_python())
    def test_every_python_block_is_run_or_says_why_not(self, page: str) -> None:
        """A block that is not marked illustrative belongs to a page this file (or
        tests/test_docs_snippets.py) runs."""
        unaccounted = [] if page in PAGES else [body.splitlines()[0] for body in runnable(page)]
        assert unaccounted == []

    @pytest.mark.spawns
    @pytest.mark.parametrize("page", sorted(PAGES))
    def test_the_blocks_of_the_page_run_as_written(self, page: str, tmp_path: Path) -> None:
        """The page's blocks run in order without an error or a stray line of output, and
        do what the page says (the epilogue's checks)."""
        done = run_page(page, tmp_path)
        assert (done.returncode, done.stderr, done.stdout) == (0, "", PAGES[page].expected)

    def test_every_page_run_has_blocks_to_run(self) -> None:
        """A page listed with stand-ins still has a block that runs (no prelude left over)."""
        assert [page for page in PAGES if not runnable(page)] == []
