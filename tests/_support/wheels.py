"""The project's wheel, built offline and installed in a fresh venv with only what it declares
(and an extra's requirements when one is asked for): nothing of the development environment
is visible in it, so a dependency the wheel or an extra forgets to declare fails there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What building the project's wheel reads from its source tree.
PROJECT_FILES = ("pyproject.toml", "README.md")
PROJECT_FOLDERS = ("engine", "schemas", "policies")


def copy_project(target: Path, extra_files: tuple[str, ...] = ()) -> None:
    """The project's installable files (and ``extra_files``) copied into ``target``, without
    what an install or a run left beside them (``*.egg-info``, byte code)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in (*PROJECT_FILES, *extra_files):
        shutil.copy2(ROOT / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in PROJECT_FOLDERS:
        shutil.copytree(ROOT / name, target / name, ignore=ignore)


#: Wheels of the runtime dependencies, fetched once (pip download) and reused offline after.
WHEEL_CACHE = ROOT / ".venv" / "wheel-cache"


def distribution_name(requirement: str) -> str:
    """The normalized distribution name a requirement (or a distribution's Name) starts with."""
    name = re.split(r"[<>=!~ ;\[]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def isolated_environment() -> dict[str, str]:
    """This process's environment without ``PYTHONPATH``: a source tree on it would be what a
    fresh venv imports (and what pip finds installed there) instead of the wheel."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def pip(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *argv],
        capture_output=True,
        text=True,
        check=False,
        env=isolated_environment(),
    )


def build_wheel(work: Path) -> Path:
    """The project's wheel, built into ``work/dist`` without build isolation (offline), from a
    copy of the source tree in ``work/source``: setuptools writes ``build/`` and ``*.egg-info``
    where it builds, so a build in the checkout would race any other test reading it."""
    source = work / "source"
    copy_project(source)
    dist = work / "dist"
    built = pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source))
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("prunewarden-*.whl")
    return wheel


def install_wheel(wheel: Path, env_dir: Path, extras: str = "") -> Path:
    """A fresh venv at ``env_dir`` (no system site-packages) holding ``wheel`` with ``extras``
    (``"cel-native"``) and only what they declare, installed from :data:`WHEEL_CACHE` without an
    index; the cache is filled once (pip download) when it lacks a requirement. The venv's
    ``bin``."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    target = f"{wheel}[{extras}]" if extras else str(wheel)
    install = ("--python", str(python), "install", "-q", "--no-index")
    offline = pip(*install, "--find-links", str(WHEEL_CACHE), target)
    if offline.returncode != 0:  # the cache lacks a dependency: fetch them once, then install
        fetched = pip("download", "-q", "--only-binary", ":all:", "-d", str(WHEEL_CACHE), target)
        assert fetched.returncode == 0, fetched.stderr
        for copy in WHEEL_CACHE.glob("prunewarden-*.whl"):  # pip download copies it too
            copy.unlink()
        offline = pip(*install, "--find-links", str(WHEEL_CACHE), target)
    assert offline.returncode == 0, offline.stderr
    return env_dir / "bin"


def install_editable(source: Path, env_dir: Path, extras: str = "") -> Path:
    """A fresh venv at ``env_dir`` holding ``source`` installed as ``pip install -e`` does
    (``extras`` as in :func:`install_wheel`), built without isolation by the setuptools of the
    venv, every requirement from :data:`WHEEL_CACHE` (filled once, from what ``source``'s
    pyproject.toml declares, when it lacks one). The venv's ``bin``."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    target = f"{source}[{extras}]" if extras else str(source)
    python = str(env_dir / "bin" / "python")
    install = ("--python", python, "install", "-q", "--no-index", "--find-links", str(WHEEL_CACHE))
    project = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"]]
    for extra in filter(None, extras.split(",")):
        wanted += project["optional-dependencies"][extra]
    for step, needs in (
        (("setuptools>=69",), ["setuptools>=69"]),
        (("--no-build-isolation", "-e", target), wanted),
    ):
        done = pip(*install, *step)
        if done.returncode != 0:  # the cache lacks a requirement: fetch them once, then install
            fetched = pip(
                "download", "-q", "--only-binary", ":all:", "-d", str(WHEEL_CACHE), *needs
            )
            assert fetched.returncode == 0, fetched.stderr
            done = pip(*install, *step)
        assert done.returncode == 0, done.stderr
    return env_dir / "bin"
