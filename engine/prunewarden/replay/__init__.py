"""Traces replayed through sessions: the trace format, where traces are read from (local,
fsspec, compressed), runs in worker processes or on a Dask cluster, the decision-by-decision
diff of two policies, decisions as Parquet, and fitting a calibration to healthy traces.
"""

from __future__ import annotations

from prunewarden.replay._dask import DaskCluster, ExecutorError, run_on_dask
from prunewarden.replay._degenerate import Degenerate, degenerate
from prunewarden.replay._diff import (
    DiffJob,
    Group,
    GroupKey,
    TraceDiff,
    compare,
    diff_in_worker,
    diff_trace,
    run_diff_job,
)
from prunewarden.replay._events import TraceEvent, TraceHeader
from prunewarden.replay._fit import (
    DEFAULT_HEADROOM,
    DEFAULT_RATE,
    CalibrationError,
    Fit,
    TraceData,
    fit,
    halts,
    read_trace,
)
from prunewarden.replay._fit_cusum import DEFAULT_CUSUM_MARGIN
from prunewarden.replay._fit_extends import base_outside, extends_reference
from prunewarden.replay._parquet import decision_rows, write_decisions_parquet
from prunewarden.replay._power import canary_only_traces, power, read_cycles, render_power
from prunewarden.replay._run import (
    AuditTarget,
    Halt,
    ReplayJob,
    SilentLogger,
    TraceRun,
    TraceSummary,
    concatenate,
    replay_in_worker,
    replay_trace,
    run_jobs,
    run_replay_job,
    run_trace,
)
from prunewarden.replay._sources import expand_traces, open_trace
from prunewarden.replay._trace import TraceReader

__all__ = [
    "DEFAULT_CUSUM_MARGIN",
    "DEFAULT_HEADROOM",
    "DEFAULT_RATE",
    "AuditTarget",
    "CalibrationError",
    "DaskCluster",
    "Degenerate",
    "DiffJob",
    "ExecutorError",
    "Fit",
    "Group",
    "GroupKey",
    "Halt",
    "ReplayJob",
    "SilentLogger",
    "TraceData",
    "TraceDiff",
    "TraceEvent",
    "TraceHeader",
    "TraceReader",
    "TraceRun",
    "TraceSummary",
    "base_outside",
    "canary_only_traces",
    "compare",
    "concatenate",
    "decision_rows",
    "degenerate",
    "diff_in_worker",
    "diff_trace",
    "expand_traces",
    "extends_reference",
    "fit",
    "halts",
    "open_trace",
    "power",
    "read_cycles",
    "read_trace",
    "render_power",
    "replay_in_worker",
    "replay_trace",
    "run_diff_job",
    "run_jobs",
    "run_on_dask",
    "run_replay_job",
    "run_trace",
    "write_decisions_parquet",
]
