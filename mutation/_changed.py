"""The modules of the gate a branch changed: ``python -m mutation --changed``.

A branch is compared with the point where it left ``main`` (``git merge-base``), its working
tree included, so that a developer can run the gate over what they are about to merge: the
files ``git diff --name-only`` names, those of them that are modules of the gate.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

ENGINE_PREFIX = "engine/"


class ChangedError(Exception):
    """git could not say what changed (not a repository, no such base)."""


def _git(root: Path, *argv: str) -> str:
    git = shutil.which("git")
    if git is None:
        msg = "git is not on PATH"
        raise ChangedError(msg)
    done = subprocess.run(  # noqa: S603 - git, with arguments, no shell
        [git, *argv], cwd=root, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        msg = f"git {' '.join(argv)}: {lines[0]}"
        raise ChangedError(msg)
    return done.stdout


def changed_modules(root: Path, base: str, modules: Iterable[str]) -> list[str]:
    """The ``modules`` (paths under ``engine/``) that differ between the merge base of ``HEAD``
    and ``base`` and the working tree of ``root``, in the order of ``modules``."""
    merge_base = _git(root, "merge-base", "HEAD", base).strip()
    names = _git(root, "diff", "--name-only", "--no-renames", merge_base, "--").splitlines()
    changed = {name.removeprefix(ENGINE_PREFIX) for name in names if name.startswith(ENGINE_PREFIX)}
    return [module for module in modules if module in changed]
