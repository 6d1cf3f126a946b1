"""What every workload needs: the engine as a deployment runs it, and its stages one by one.

The deployment setting: every decision (every pass) is written to a chained, locked audit file
with ``fsync="batch"``, in a temporary folder removed at exit.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog
from prunewarden import AuditLog, Engine
from prunewarden.audit._record import (
    DecisionContext,
    decision_record,
    input_digest,
    subject_of,
    texts_of,
)
from prunewarden.inputs._model import Request
from prunewarden.inputs._parse import parse_request_encoded
from prunewarden.pipeline._compile import Pipeline, compile_policy

# Opened once and kept for the life of the process: every record costs a real write(2). Closed
# at exit, so that the interpreter does not warn about a file left open.
_DEVNULL = Path(os.devnull).open("w", encoding="utf-8")  # noqa: SIM115
atexit.register(_DEVNULL.close)


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


_AUDIT_DIR = Path(tempfile.mkdtemp(prefix="prunewarden-bench-"))
atexit.register(shutil.rmtree, _AUDIT_DIR, ignore_errors=True)
_logs: list[AuditLog] = []


def audit_log(name: str) -> AuditLog:
    """A chained audit file (``fsync="batch"``), as a deployment writes one."""
    log = AuditLog(_AUDIT_DIR / f"{name.replace('/', '-')}-{len(_logs)}.jsonl", fsync="batch")
    _logs.append(log)
    return log


def default_engine(name: str = "engine") -> Engine:
    """The bundled default policy (the source documents' thresholds), writing every decision
    to a chained audit file."""
    return Engine.default(audit=audit_log(name))


def document_stages(
    engine: Engine, documents: Sequence[Mapping[str, Any]]
) -> dict[str, Callable[[], object]]:
    """``engine.evaluate`` over ``documents``, cut into its stages, each run alone on the output
    of the one before (prepared once here): validation, the guard, the decision, the audit record
    (input digest, subject, fields) and the log write."""
    scores = engine.policy.spec.scores
    pipelines = compile_policy(engine.policy)
    parsed = [parse_request_encoded(dict(d), scores) for d in documents]
    steps = [(pipelines[check], request) for check, request, _ in parsed]
    return {
        "validation": lambda: [parse_request_encoded(dict(d), scores) for d in documents],
        **decision_stages(engine, steps, documents, encodings=[e for _, _, e in parsed]),
    }


Step = tuple[Pipeline, Request]


def decision_stages(
    engine: Engine,
    steps: Sequence[Step],
    documents: Sequence[Mapping[str, Any]],
    digests: Sequence[str | None] | None = None,
    encodings: Sequence[bytes | None] | None = None,
) -> dict[str, Callable[[], object]]:
    """The stages after validation, for typed requests and the documents they came from
    (``digests``: their input digests, when validation computed them; ``encodings``: the
    documents as validation serialized them, from which the record finishes the digest)."""
    policy = engine.policy
    sink = audit_log("stages")
    sink.add_policy(policy)
    verdicts = [(p, p.guard.evaluate(p.settings, r)) for p, r in steps]
    decisions = [p.to_decision(v) for p, v in verdicts]
    known = digests if digests is not None else [None] * len(steps)
    written = encodings if encodings is not None else [None] * len(steps)
    rows = list(zip(decisions, steps, documents, known, written, strict=True))

    def records() -> list[dict[str, Any]]:
        return [
            decision_record(d, context_of(r, doc, h, e), policy) for d, (_, r), doc, h, e in rows
        ]

    built = records()
    return {
        "guard": lambda: [p.guard.evaluate(p.settings, r) for p, r in steps],
        "decision": lambda: [p.to_decision(v) for p, v in verdicts],
        "record": records,
        "log": lambda: log_each(sink, built),
    }


def context_of(
    request: Request,
    document: Mapping[str, Any],
    digest: str | None = None,
    encoded: bytes | None = None,
) -> DecisionContext:
    """What Engine._decide gathers for a record (no session, no labels)."""
    return DecisionContext(
        input_digest(document, encoded) if digest is None else digest,
        subject_of(request),
        None,
        {},
        document,
        texts_of(request),
    )


def log_each(sink: AuditLog, records: Sequence[Mapping[str, Any]]) -> None:
    for record in records:
        sink.write(dict(record))
