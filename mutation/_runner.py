"""Running mutants: each applied alone to a private copy of the source tree, its area's tests
run against that copy with ``-x`` and a timeout, a few at a time.

Starting Python and importing pytest, cel-python, jsonschema, Starlette... costs more than most
killed mutants' tests take, so this process imports them once (never prunewarden itself) and
forks one child per mutant. The child puts its slot's copy first on ``sys.path`` (and in
``PYTHONPATH``, for the processes the tests start), imports prunewarden from it, and runs
``pytest.main``. A child that runs past its timeout is killed with its process group.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from mutation._areas import Stages
from mutation._operators import Mutant

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"
# What the copy of the tree needs besides the package: the data folders the source checkout
# reads from the top of the repository (prunewarden._resources).
_DATA = ("schemas", "policies")
# Imported once in this process so that every child inherits them (none imports prunewarden).
_PRELOAD = (
    "hypothesis",
    "celpy",
    "lark",
    "jsonschema",
    "yaml",
    "httpx",
    "starlette.applications",
    "structlog",
    "orjson",
    "rfc8785",
)
_POLL_SECONDS = 0.02
# pytest's exit codes: 0 all passed (the mutant survived), 5 no test ran (a mistake of the area).
_PASSED, _NO_TESTS = 0, 5


@dataclass(frozen=True, slots=True)
class Result:
    """What one run said: ``killed``, ``survived``, ``timeout`` (counts as killed) or
    ``error`` (the area ran no test: its list is wrong)."""

    mutant: Mutant | None
    tests: Stages
    outcome: str
    seconds: float
    cpu_seconds: float = 0.0


@dataclass(slots=True)
class Job:
    mutant: Mutant | None  # None: the baseline run of an area on the unchanged tree
    tests: Stages
    timeout: float


@dataclass(slots=True)
class _Running:
    job: Job
    pid: int
    slot: Path
    started: float
    original: str | None = None


def preload() -> None:
    """Import the heavy libraries the tests use and pytest's installed plugins (langsmith's
    alone takes two seconds), so forked children start warm."""
    plugins = [entry.value.split(":")[0] for entry in entry_points(group="pytest11")]
    for name in (*_PRELOAD, *plugins):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    if any(name == "prunewarden" or name.startswith("prunewarden.") for name in sys.modules):
        msg = "prunewarden was imported before the mutants ran: the children would share it"
        raise RuntimeError(msg)


@contextlib.contextmanager
def slots(count: int, keep: str | None = None) -> Iterator[list[Path]]:
    """``count`` private copies of the tree (package and data folders), removed at the end
    unless ``keep`` names a folder to make them in (each child's output is in its slot's
    ``output.txt``)."""
    with contextlib.ExitStack() as stack:
        scratch = keep or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="prunewarden-mutation-")
        )
        made = []
        for index in range(count):
            slot = Path(scratch) / f"slot{index}"
            shutil.copytree(
                ENGINE / "prunewarden",
                slot / "engine" / "prunewarden",
                ignore=shutil.ignore_patterns("__pycache__", "_data"),
            )
            for name in _DATA:
                (slot / name).symlink_to(ROOT / name, target_is_directory=True)
            made.append(slot)
        yield made


def run_jobs(
    jobs: Sequence[Job], slot_dirs: Sequence[Path], report: Callable[[Result], None]
) -> list[Result]:
    """Every job, as many at a time as there are slots; ``report`` hears each result."""
    pending = list(reversed(jobs))
    free = list(slot_dirs)
    running: dict[int, _Running] = {}
    results: list[Result] = []
    while pending or running:
        while pending and free:
            run = _start(pending.pop(), free.pop())
            running[run.pid] = run
        done = _reap(running)
        for run, outcome, cpu in done:
            del running[run.pid]
            _restore(run)
            free.append(run.slot)
            seconds = time.monotonic() - run.started
            result = Result(run.job.mutant, run.job.tests, outcome, seconds, cpu)
            results.append(result)
            report(result)
        if not done:
            time.sleep(_POLL_SECONDS)
    return results


def _start(job: Job, slot: Path) -> _Running:
    original = None
    if job.mutant is not None:
        target = slot / "engine" / job.mutant.path
        original = target.read_text(encoding="utf-8")
        _write(target, job.mutant.apply(original))
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(job, slot)
    return _Running(job, pid, slot, time.monotonic(), original)


def _child(job: Job, slot: Path) -> None:
    code = 70
    try:
        os.setsid()  # its own process group: a timeout kills the servers its tests started
        output = os.open(slot / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(output, 1)
        os.dup2(output, 2)
        engine = str(slot / "engine")
        sys.path.insert(0, engine)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (engine, os.environ.get("PYTHONPATH", "")) if p
        )
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = str(slot / ".hypothesis")
        os.chdir(ROOT)
        # The plugins preloaded here (hypothesis, anyio) cannot have their asserts rewritten;
        # pytest's warning about it is not the mutant's doing.
        quiet = ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
        ran: list[str] = []
        for stage in job.tests:  # the next stage only when this one passed
            # A test file runs once per child: Hypothesis refuses a test run again from
            # another instance of its class in the same process.
            paths = [p for p in stage if p not in ran]
            if not paths:  # never an empty list: pytest would run the whole suite
                continue
            ignored = [f"--ignore={p}" for p in ran]
            options = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", *quiet]
            code = int(pytest.main([*paths, *ignored, *options]))
            ran.extend(stage)
            if code != _PASSED:
                break
    except BaseException:  # noqa: BLE001 - a child never returns into the parent's loop
        traceback.print_exc()
    finally:
        os._exit(code)


def _reap(running: dict[int, _Running]) -> list[tuple[_Running, str, float]]:
    """The runs that ended (or ran out of time), each with its outcome and the CPU time the
    child spent."""
    done = []
    now = time.monotonic()
    for run in list(running.values()):
        pid, status, usage = os.wait4(run.pid, os.WNOHANG)
        if pid == 0:
            if now - run.started > run.job.timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.pid, signal.SIGKILL)
                _, _, usage = os.wait4(run.pid, 0)
                done.append((run, "timeout", usage.ru_utime + usage.ru_stime))
            continue
        cpu = usage.ru_utime + usage.ru_stime
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)  # anything its tests left running
        code = os.waitstatus_to_exitcode(status)
        outcome = {_PASSED: "survived", _NO_TESTS: "error"}.get(code, "killed")
        done.append((run, outcome, cpu))
    return done


def _restore(run: _Running) -> None:
    if run.job.mutant is not None and run.original is not None:
        _write(run.slot / "engine" / run.job.mutant.path, run.original)


_stamps = itertools.count(1)


def _write(target: Path, text: str) -> None:
    """Write ``text`` with a modification time no earlier write had: a cached ``.pyc`` is
    trusted when the source's size and whole-second time match, and a mutant often keeps the
    size, so each version gets its own second (in the past: nothing looks ahead of its time)."""
    target.write_text(text, encoding="utf-8")
    stamp = 1_000_000_000 + next(_stamps)
    os.utime(target, (stamp, stamp))
