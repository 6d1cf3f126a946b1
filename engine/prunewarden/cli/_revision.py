"""``diff --base-ref REF``: the base policy as a git revision holds it, with its ``extends`` chain.

The CI recipe ``git show main:policies/x.yaml > /tmp/base.yaml`` loses the folder the policy
lives in, so a relative ``extends`` no longer resolves. Here the policy and every file its chain
extends (and the ``policy.lock`` beside each) are read from the revision into a scratch copy of
their folders, loaded as usual, and problems name ``REF:path`` rather than the scratch copy.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

import yaml

from prunewarden.errors import PolicyError, Problem
from prunewarden.policy import BUILTIN, LOCK_FILENAME, Policy, load_policy

MAX_FILES = 8  # policies in one extends chain (prunewarden.policy's limit)


def load_policy_at(ref: str, path: str, base_dirs: tuple[str, ...] = ()) -> Policy:
    """The policy file ``path`` (as named on the command line) as git revision ``ref`` of its
    repository holds it; ``base_dirs`` inside the repository name the revision's folders of
    shared bases. Raises :class:`PolicyError` when it cannot be read there."""
    shown = f"{ref}:{path}"
    top = _git(Path(path).resolve().parent, "rev-parse", "--show-toplevel")
    if top is None:
        raise PolicyError([Problem(shown, 0, 0, "$", "not in a git repository")])
    root = Path(top.strip())
    relative = PurePosixPath(Path(os.path.realpath(path)).relative_to(root.resolve()).as_posix())
    with tempfile.TemporaryDirectory(prefix="prunewarden-ref-") as scratch:
        copy = Path(scratch)
        _export_chain(root, ref, relative, copy)
        try:
            return load_policy(copy / relative, base_dirs=_in_copy(base_dirs, root, copy))
        except PolicyError as exc:
            raise PolicyError([_renamed(p, copy, ref) for p in exc.problems]) from None


def _export_chain(root: Path, ref: str, first: PurePosixPath, copy: Path) -> None:
    """Write ``first`` and the files its chain extends, as ``ref`` holds them, under ``copy``."""
    wanted: PurePosixPath | None = first
    seen: set[PurePosixPath] = set()
    while wanted is not None and wanted not in seen and len(seen) < MAX_FILES:
        seen.add(wanted)
        text = _git(root, "show", f"{ref}:{wanted}")
        if text is None:
            if wanted == first:
                message = f"not in git revision {ref} (or {ref} is not a revision)"
                raise PolicyError([Problem(f"{ref}:{wanted}", 0, 0, "$", message)])
            return  # the load names the missing file at the extends that wants it
        target = copy / wanted
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        lock = _git(root, "show", f"{ref}:{wanted.parent / LOCK_FILENAME}")
        if lock is not None:
            (target.parent / LOCK_FILENAME).write_text(lock, encoding="utf-8")
        wanted = _extended(text, wanted)


def _in_copy(base_dirs: tuple[str, ...], root: Path, copy: Path) -> tuple[str, ...]:
    """The allowed base folders, those inside the repository moved into the scratch copy."""
    moved: list[str] = []
    for folder in base_dirs:
        real = Path(os.path.realpath(folder))
        inside = real.is_relative_to(root.resolve())
        moved.append(str(copy / real.relative_to(root.resolve())) if inside else folder)
    return tuple(moved)


def _extended(text: str, path: PurePosixPath) -> PurePosixPath | None:
    """The repository path of the file ``text`` extends, if it extends one inside it."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None  # the load reports it, located
    extends = data.get("extends") if isinstance(data, dict) else None
    if not isinstance(extends, str) or not extends or extends.startswith(BUILTIN):
        return None
    joined = PurePosixPath(os.path.normpath(str(path.parent / extends)))
    return None if joined.is_absolute() or joined.parts[:1] == ("..",) else joined


def _renamed(problem: Problem, copy: Path, ref: str) -> Problem:
    """A problem in the scratch copy, named as the revision's file."""
    name = problem.file
    for prefix in (str(copy) + os.sep, os.path.realpath(copy) + os.sep):
        if name.startswith(prefix):
            return dataclasses.replace(problem, file=f"{ref}:{name[len(prefix) :]}")
    return problem


def _git(where: Path, *argv: str) -> str | None:
    """Standard output of ``git argv`` run in ``where``, or None when it fails."""
    git = shutil.which("git")
    if git is None:
        return None
    done = subprocess.run(  # noqa: S603 - git, with arguments, no shell
        [git, "-C", str(where), *argv], capture_output=True, text=True, check=False
    )
    return done.stdout if done.returncode == 0 else None
