"""Traces replayed through sessions: the trace format, runs in worker processes, the
decision-by-decision diff of two policies, and fitting a calibration to healthy traces.
"""

from __future__ import annotations

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
    extends_reference,
    fit,
    halts,
    read_trace,
)
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
from prunewarden.replay._trace import TraceReader

__all__ = [
    "DEFAULT_HEADROOM",
    "DEFAULT_RATE",
    "AuditTarget",
    "CalibrationError",
    "DiffJob",
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
    "compare",
    "concatenate",
    "diff_in_worker",
    "diff_trace",
    "extends_reference",
    "fit",
    "halts",
    "read_trace",
    "replay_in_worker",
    "replay_trace",
    "run_diff_job",
    "run_jobs",
    "run_replay_job",
    "run_trace",
]
