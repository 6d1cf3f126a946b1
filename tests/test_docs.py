"""The outputs shown in docs/ are what the commands print today.

Each run happens in a temporary copy of the example files, with the prunewarden of this
environment first on PATH. Only what differs from run to run is masked, on both sides: decision
ids, times, the audit chain's head hash and durations. Policy digests and file hashes are kept,
so a changed example policy shows up as a changed page.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # .venv/bin under make test: it holds the prunewarden script
COPIED = ("examples", "policies", "schemas")

MASKS = [
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<time>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<decision-id>"),
    (re.compile(r"head sha256:[0-9a-f]{64}"), "head sha256:<chain-head>"),
    (re.compile(r"\bin \d+(?:\.\d+)?s\b"), "in <duration>"),
]

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(page: str) -> list[str]:
    return FENCE.findall((ROOT / page).read_text(encoding="utf-8"))


def mask(text: str, workdir: Path) -> str:
    text = text.replace(str(workdir), "<workdir>")
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def run_shell(script: str, workdir: Path) -> str:
    """Run ``script`` with sh in ``workdir``; standard output and error together, as shown."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRUNEWARDEN_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"  # the two streams interleave as on a terminal
    result = subprocess.run(
        ["sh", "-c", script],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    return result.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    for name in COPIED:
        shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


@pytest.mark.slow
def test_demo_page_shows_what_the_demo_prints(workdir: Path) -> None:
    """docs/demo.md shows what examples/demo.sh prints, as make demo runs it."""
    (expected,) = blocks("docs/demo.md")
    actual = run_shell("sh examples/demo.sh", workdir)
    assert mask(actual, workdir) == mask(expected, workdir), "re-run make demo into docs/demo.md"
