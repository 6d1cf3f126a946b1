"""How ``replay`` and ``diff`` run their traces: here, in worker processes, or on a Dask
cluster (``--executor dask``), with progress.

Every way gives the same output, so that ``--jobs`` only changes how long a run takes: a worker
writes its trace's lines to a temporary file, and the files are copied to the output in job
order once every job is done; a Dask task returns its trace's lines, written in job order as
they arrive. The progress line adds up what each job reports, wherever it runs. When it is shown
depends on a clock the caller may replace (``CLOCK``), so that tests reading the progress output
do not depend on how fast the machine is.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from prunewarden.replay import (
    DaskCluster,
    DiffJob,
    ReplayJob,
    TraceReader,
    concatenate,
    run_jobs,
    run_on_dask,
)

#: The clock that paces progress lines; tests replace it with a fixed or stepping one.
CLOCK: Callable[[], float] = time.monotonic


@dataclass(frozen=True, slots=True)
class Runner:
    """Runs jobs one after another here, or in worker processes writing to temporary files
    that are then copied to ``out`` in job order, so that both give the same output."""

    workers: int
    out: IO[str] | None
    progress: Progress
    cluster: DaskCluster | None = None

    def run(
        self,
        jobs: Sequence[Any],
        *,
        serial: Callable[[Any], Any],
        parallel: Callable[[Any], Any],
    ) -> list[Any]:
        if self.cluster is not None:
            return self._run_on_dask(self.cluster, jobs)
        if self.workers == 1 or len(jobs) == 1:
            return [serial(job) for job in jobs]
        out, listen = self.out, self.progress.update if self.progress.on else None
        with tempfile.TemporaryDirectory(prefix="prunewarden-") as scratch:
            parts = [str(Path(scratch) / f"{job.index}.jsonl") for job in jobs]
            staged = [
                _with_output(job, part if out is not None else None)
                for job, part in zip(jobs, parts, strict=True)
            ]
            results = run_jobs(parallel, staged, min(self.workers, len(jobs)), listen)
            if out is not None:
                concatenate(parts, out)
                out.flush()
        return results

    def _run_on_dask(self, cluster: DaskCluster, jobs: Sequence[Any]) -> list[Any]:
        done = 0

        def write(result: Any, lines: str) -> None:
            nonlocal done
            if self.out is not None:
                self.out.write(lines)
            if self.progress.on:
                self.progress.update(done, result.events, 0)
            done += 1

        results = run_on_dask(cluster, jobs, write)
        if self.out is not None:
            self.out.flush()
        return results


def _with_output(job: Any, part: str | None) -> Any:
    """The job writing its output to the file ``part`` (None: nowhere)."""
    if isinstance(job, ReplayJob):
        return ReplayJob(job.index, job.trace, job.policy, part, job.audit)
    return DiffJob(job.index, job.trace, job.base, job.candidate, part or os.devnull)


class Progress:
    """Events replayed and the share of the traces' bytes read, on one line of standard error
    (rewritten in place on a terminal, a line every few seconds otherwise)."""

    def __init__(
        self,
        stream: IO[str],
        verb: str,
        traces: Sequence[str],
        *,
        on: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.verb = verb
        self.on = on
        self.tty = on and _isatty(stream)
        self.every = 0.1 if self.tty else 2.0
        self.total = sum(_size(trace) for trace in traces) if on else 0
        self.events: dict[int, int] = {}
        self.read: dict[int, int] = {}
        self.shown = 0.0 if self.tty else clock()  # a log gets its first line later
        self.width = 0

    def callback(self, index: int) -> Callable[[TraceReader], None] | None:
        if not self.on:
            return None

        def report(reader: TraceReader) -> None:
            self.update(index, reader.events, reader.bytes_read)

        return report

    def update(self, index: int, events: int, read: int) -> None:
        self.events[index], self.read[index] = events, read
        now = self.clock()
        if now - self.shown >= self.every:
            self.shown = now
            self._show()

    def _show(self) -> None:
        events = sum(self.events.values())
        share = f", {100 * sum(self.read.values()) // self.total}%" if self.total else ""
        text = f"{self.verb}: {events:,} events{share}"
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear the line on a terminal; in a log, say where it ended."""
        if not self.on:
            return
        if self.tty:
            if self.width:
                self.stream.write("\r" + " " * self.width + "\r")
        elif self.events:
            self._show()
        self.stream.flush()


def progress_for(
    args: argparse.Namespace, stderr: IO[str], verb: str, traces: Sequence[str]
) -> Progress:
    on = args.progress if args.progress is not None else _isatty(stderr)
    return Progress(stderr, verb, traces, on=on, clock=CLOCK)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size  # noqa: PTH116 - a str path
    except OSError:
        return 0
