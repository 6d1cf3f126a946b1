"""Replay and diff on a Dask cluster: one task per trace, the policies sent once per worker.

Past one machine, traces should run on a distributed engine a platform team already operates,
not on one prunewarden grows. This module is that door, and the only one that imports
``distributed`` (when a run asks for it: ``pip install 'prunewarden[dask]'``).

A trace is one session (its header opens it; no later line may), so it is the unit of work: a
trace is never split, since a session's decisions depend on everything it saw before. Each
policy is scattered to every worker once, before any task, and a task names it by its future;
no task carries a policy. A task returns the trace's summary and its output lines; results are
handed on in trace order as they arrive (later traces wait in memory for an earlier one), so the
output is the serial run's, line for line. At most :data:`IN_FLIGHT_PER_WORKER` tasks per
worker are submitted ahead, which bounds the scheduler's load and the results held here.

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
IN_FLIGHT_PER_WORKER = 32
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
        submitted: deque[Any] = deque()
        results: list[Result] = []
        pending = iter(jobs)
        window = IN_FLIGHT_PER_WORKER * max(1, len(client.scheduler_info()["workers"]))
        for job in pending:
            submitted.append(_submit(client, job, policies, run))
            if len(submitted) >= window:
                break
        for job in pending:
            results.append(_hand_on(submitted.popleft(), on_result))
            submitted.append(_submit(client, job, policies, run))
        while submitted:
            results.append(_hand_on(submitted.popleft(), on_result))
        return results


def _hand_on(future: Any, on_result: Callable[[Result, str], None]) -> Result:
    result, lines = future.result()
    future.release()
    on_result(result, lines)
    return result  # type: ignore[no-any-return]


def _scatter(client: Any, job: Job) -> tuple[Any, ...]:
    """The job's policies, sent to every worker now, once."""
    policies = (job.policy,) if isinstance(job, ReplayJob) else (job.base, job.candidate)
    return tuple(client.scatter(policy, broadcast=True, hash=False) for policy in policies)


def _submit(client: Any, job: Job, policies: tuple[Any, ...], run: str) -> Any:
    key = f"prunewarden-{run}-{job.index}"
    if isinstance(job, ReplayJob):
        return client.submit(replay_task, job.index, job.trace, job.audit, *policies, key=key)
    return client.submit(diff_task, job.index, job.trace, *policies, key=key)


@contextlib.contextmanager
def _client(cluster: DaskCluster) -> Iterator[Any]:
    try:
        distributed = optional_module("distributed", f"--executor dask needs {DASK_EXTRA}")
    except OSError as exc:
        raise ExecutorError(exc.strerror or str(exc)) from None
    with contextlib.ExitStack() as stack:
        try:
            if cluster.address is None:
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
