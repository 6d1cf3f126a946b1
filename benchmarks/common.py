"""What every workload needs: the engine as an application runs it, and its stages one by one."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog
from prunewarden import Decision, Engine
from prunewarden.auditlog import log_decision
from prunewarden.compiler import compile_policy
from prunewarden.inputs import parse_request

# Opened once and kept for the life of the process: every record costs a real write(2).
_DEVNULL = Path(os.devnull).open("w", encoding="utf-8")  # noqa: SIM115


def json_logger() -> Any:
    """The command line's decision logger (one JSON object per line, ISO timestamps, sorted
    keys), writing to /dev/null, with structlog's advice for speed followed: the bound logger is
    cached on first use."""
    return structlog.wrap_logger(
        structlog.WriteLogger(_DEVNULL),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        cache_logger_on_first_use=True,
    )


def default_engine() -> Engine:
    """The bundled default policy (the source documents' thresholds), logging every decision."""
    return Engine.default(logger=json_logger())


def document_stages(
    engine: Engine, documents: Sequence[Mapping[str, Any]]
) -> dict[str, Callable[[], object]]:
    """``engine.evaluate`` over ``documents``, cut into its four stages, each run alone on the
    output of the one before (prepared once here)."""
    scores = engine.policy.spec.scores
    pipelines = compile_policy(engine.policy)
    logger = json_logger()
    requests = [parse_request(dict(d), scores) for d in documents]
    steps = [(pipelines[check], request) for check, request in requests]
    verdicts = [(p, p.guard.evaluate(p.settings, r)) for p, r in steps]
    decisions = [p.to_decision(v) for p, v in verdicts]
    return {
        "validation": lambda: [parse_request(dict(d), scores) for d in documents],
        "guard": lambda: [p.guard.evaluate(p.settings, r) for p, r in steps],
        "decision": lambda: [p.to_decision(v) for p, v in verdicts],
        "log": lambda: log_each(logger, decisions),
    }


def log_each(logger: Any, decisions: Sequence[Decision]) -> None:
    for decision in decisions:
        log_decision(logger, decision)
