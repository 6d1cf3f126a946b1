"""The README's install line, ``pip install -e .``, run in a fresh venv: the first decision runs
as the README shows it, and ``mypy --strict`` sees the package's types there (a ``.pth`` path,
not an import hook a type checker cannot follow), the HTTP client's answers included."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support.wheels import ROOT, copy_project, install_editable, isolated_environment

# The wheel, the pre-commit and these tests each install the project from a copy of its source
# tree (_support.wheels.copy_project), never in the checkout; one worker runs them
# (docs/dev/testing.md).
pytestmark = [pytest.mark.xdist_group("source-tree"), pytest.mark.spawns]

BLOCK = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def page_blocks(page: str, lang: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [m["body"] for m in BLOCK.finditer(text) if m["lang"] == lang]


def install_line() -> list[str]:
    """The README's install command: ``pip install -e .``, and the extras it names."""
    (line,) = [
        line.split("#")[0].strip()
        for block in page_blocks("README.md", "sh")
        for line in block.splitlines()
        if line.startswith("pip install")
    ]
    return shlex.split(line)


def first_decision() -> str:
    (block,) = [b for b in page_blocks("README.md", "python") if "Engine.default()" in b]
    return block


def client_snippet() -> str:
    (block,) = [b for b in page_blocks("docs/server.md", "python") if "Client(" in b]
    return block


@pytest.fixture(scope="module")
def editable(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project installed by the README's line into a fresh venv (with the
    ``client`` extra, for the HTTP client's snippet); the venv's ``bin``."""
    argv = install_line()
    assert argv[:3] == ["pip", "install", "-e"]
    (target,) = argv[3:]
    project, _, extras = target.partition("[")
    assert project == "."
    work = tmp_path_factory.mktemp("editable")
    copy_project(work / "source")
    wanted = ",".join(filter(None, [extras.rstrip("]"), "client"]))
    return install_editable(work / "source", work / "venv", wanted)


def mypy_strict(
    modules: dict[str, str], venv_bin: Path, folder: Path
) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` of this environment on ``modules`` (file name: source), resolving
    imports in the venv's site-packages only (no configuration file, no ``MYPYPATH``, no
    cache)."""
    for name, source in modules.items():
        (folder / name).write_text(source, encoding="utf-8")
    env = {k: v for k, v in isolated_environment().items() if k != "MYPYPATH"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--config-file=",
            "--no-incremental",
            f"--python-executable={venv_bin / 'python'}",
            *modules,
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class TestEditableInstall:
    def test_the_first_decision_runs_as_shown(self, editable: Path, tmp_path: Path) -> None:
        """The README's first decision, outside the checkout, prints what its comment says."""
        snippet = first_decision()
        shown = re.search(r"# (deny .*)$", snippet, re.MULTILINE)
        assert shown is not None
        done = subprocess.run(
            [str(editable / "python"), "-c", snippet],
            cwd=tmp_path,
            env=isolated_environment(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr, done.stdout) == (0, "", shown[1] + "\n")

    def test_mypy_strict_sees_the_package(self, editable: Path, tmp_path: Path) -> None:
        """The README's first decision and docs/server.md's client snippet type-check under
        ``--strict`` against the editable install: the engine's answer is a ``Decision``, the
        client's a ``DecisionDocument``, read by the same session calls."""
        checks = textwrap.dedent("""
            from typing import assert_type
            from prunewarden import Decision, Session
            from prunewarden.client import ClientSession, DecisionDocument, PlanDocument

            assert_type(decision, DecisionDocument)

            def embedded(session: Session) -> Decision:
                return session.authorize(segment, 0.1, 0.12)

            def shared(session: ClientSession) -> tuple[DecisionDocument, PlanDocument]:
                return session.authorize(segment, 0.1, 0.12), session.plan([segment])
        """)
        modules = {"first_decision.py": first_decision(), "client.py": client_snippet() + checks}
        done = mypy_strict(modules, editable, tmp_path)
        assert (done.returncode, done.stdout) == (0, "Success: no issues found in 2 source files\n")

    def test_the_package_is_found_through_a_path(self, editable: Path) -> None:
        """pip install -e . adds engine/ to sys.path with a .pth file: no import hook (which
        type checkers and editors cannot follow), the schemas read through the package."""
        site = next((editable.parent / "lib").glob("python*/site-packages"))
        assert list(site.glob("__editable__*finder*")) == []
        (pth,) = site.glob("__editable__.prunewarden-*.pth")
        assert pth.read_text().strip() == str(editable.parent.parent / "source" / "engine")
        done = subprocess.run(
            [
                str(editable / "python"),
                "-c",
                "import prunewarden._resources as r; print(r.data_dir('schemas'))",
            ],
            env=isolated_environment(),
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip().endswith("source/engine/prunewarden/_data/schemas")
