"""Replay and diff on a Dask cluster: one task per trace, the policies sent once per worker.

Past one machine, traces should run on a distributed engine a platform team already operates,
not on one prunewarden grows. This module is that door, and the only one that imports
``distributed`` (when a run asks for it: ``pip install 'prunewarden[dask]'``).

A trace is one session (its header opens it; no later line may), so it is the unit of work: a
trace is never split, since a session's decisions depend on everything it saw before. Each
policy is scattered to every worker once, before any task, and a task names it by its future;
no task carries a policy. A task returns the trace's summary and its output lines; results are
handed on in trace order as they arrive (later traces wait in memory for an earlier one), so the
output is the serial run's, line for line. Tasks are submitted :data:`BATCH_PER_WORKER` per
worker at a time, one batch running while the next waits behind it: a round trip to the
scheduler per batch rather than per task, and never more than two batches held here.

With no scheduler address a ``LocalCluster`` of worker processes (one thread each) is started on
the loopback interface for the run and closed after it, its logs silenced.
"""

from __future__ import annotations

import contextlib
import io
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prunewarden._optional import optional_module
from prunewarden.errors import PrunewardenError
from prunewarden.policy import Policy
from prunewarden.replay._diff import DiffJob, TraceDiff, run_diff_job
from prunewarden.replay._run import AuditTarget, ReplayJob, TraceSummary, run_replay_job

DASK_EXTRA = "pip install 'prunewarden[dask]'"
BATCH_PER_WORKER = 32
# Seconds to reach a scheduler, and for a started cluster's workers to come up.
CONNECT_TIMEOUT = 60.0

Job = ReplayJob | DiffJob
Result = TraceSummary | TraceDiff


class ExecutorError(PrunewardenError):
    """The cluster cannot be had: distributed is not installed, or the scheduler is out of
    reach."""


@dataclass(frozen=True, slots=True)
class DaskCluster:
    """Where tasks run: the scheduler at ``address``, or a local cluster of ``workers``
    processes when it is None."""

    address: str | None
    workers: int


def replay_task(
    index: int, trace: str, audit: AuditTarget | None, policy: Policy
) -> tuple[TraceSummary, str]:
    """On a worker: replay one trace under the scattered ``policy``; its summary and lines."""
    out = io.StringIO()
    summary = run_replay_job(ReplayJob(index, trace, policy, audit=audit), out)
    return summary, out.getvalue()


def diff_task(index: int, trace: str, base: Policy, candidate: Policy) -> tuple[TraceDiff, str]:
    """On a worker: diff one trace between the scattered policies; its result and changes."""
    out = io.StringIO()
    return run_diff_job(DiffJob(index, trace, base, candidate, ""), out), out.getvalue()


def run_on_dask(
    cluster: DaskCluster,
    jobs: Sequence[Job],
    on_result: Callable[[Result, str], None],
) -> list[Result]:
    """Run every job on ``cluster``; ``on_result(result, lines)`` hears each in job order as
    soon as it and every job before it are done. All jobs share their policies."""
    if not jobs:
        return []
    with _client(cluster) as client:
        policies = _scatter(client, jobs[0])
        run = uuid.uuid4().hex  # task keys unique on a scheduler other commands share
        workers = max(1, len(client.scheduler_info()["workers"]))
        size = BATCH_PER_WORKER * workers
        batches = (jobs[i : i + size] for i in range(0, len(jobs), size))
        submitted: deque[list[Any]] = deque()
        results: list[Result] = []
        for batch in batches:
            submitted.append(_submit(client, batch, policies, run))
            if len(submitted) > 1:  # one batch running, the next queued behind it
                results += _hand_on(client, submitted.popleft(), on_result)
        while submitted:
            results += _hand_on(client, submitted.popleft(), on_result)
        return results


def _hand_on(
    client: Any, futures: list[Any], on_result: Callable[[Result, str], None]
) -> list[Result]:
    """Wait for a batch, in order; hand each result on; let the cluster forget them."""
    done = client.gather(futures)
    client.cancel(futures)  # releases the results held on the workers
    for result, lines in done:
        on_result(result, lines)
    return [result for result, _ in done]


def _scatter(client: Any, job: Job) -> tuple[Any, ...]:
    """The job's policies, sent to every worker now, once."""
    policies = (job.policy,) if isinstance(job, ReplayJob) else (job.base, job.candidate)
    return tuple(client.scatter(policy, broadcast=True, hash=False) for policy in policies)


def _submit(client: Any, batch: Sequence[Job], policies: tuple[Any, ...], run: str) -> list[Any]:
    """One task per job of ``batch``, submitted in one call."""
    keys = [f"prunewarden-{run}-{job.index}" for job in batch]
    indexes, traces = [job.index for job in batch], [job.trace for job in batch]
    if isinstance(batch[0], ReplayJob):
        audits = [job.audit for job in batch if isinstance(job, ReplayJob)]
        arguments = [[policies[0]] * len(batch)]
        return list(client.map(replay_task, indexes, traces, audits, *arguments, key=keys))
    arguments = [[policy] * len(batch) for policy in policies]
    return list(client.map(diff_task, indexes, traces, *arguments, key=keys))


@contextlib.contextmanager
def _client(cluster: DaskCluster) -> Iterator[Any]:
    try:
        distributed = optional_module("distributed", f"--executor dask needs {DASK_EXTRA}")
        dask_config = optional_module("dask.config", f"--executor dask needs {DASK_EXTRA}")
    except OSError as exc:
        raise ExecutorError(exc.strerror or str(exc)) from None
    with contextlib.ExitStack() as stack:
        try:
            if cluster.address is None:
                # Every task to a worker at once, not one per free thread: a trace takes a few
                # milliseconds, about the scheduler's round trip to hand out the next one.
                saturation = {"distributed.scheduler.worker-saturation": "inf"}
                stack.enter_context(dask_config.set(saturation))
                local = stack.enter_context(
                    distributed.LocalCluster(
                        n_workers=cluster.workers,
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address="127.0.0.1:0",  # its HTTP server, on a free loopback port
                        silence_logs=logging.CRITICAL,
                    )
                )
                client = stack.enter_context(distributed.Client(local, timeout=CONNECT_TIMEOUT))
            else:
                client = stack.enter_context(
                    distributed.Client(cluster.address, timeout=CONNECT_TIMEOUT)
                )
        except (OSError, TimeoutError) as exc:
            where = cluster.address or "a local cluster"
            msg = f"cannot reach the Dask scheduler at {where}: {exc}"
            raise ExecutorError(msg) from None
        yield client
