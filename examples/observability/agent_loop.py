"""An agent loop watched by Prometheus and OpenTelemetry.

The loop plays recorded sessions (``examples/traces/``) as an agent would live: per step it
reports a rewrite cycle's scores or a turn, asks to evict a segment or to prune, or plans a
pruning pass, each step inside a span of the agent's own. The engine decides under the policy,
writes every decision to the audit log (with the step's trace and span ids) and hands it to the
Prometheus metrics (a decision hook); each call of the library becomes an OpenTelemetry span (a
call hook). ``/metrics`` is served by prometheus-client's own HTTP server on the
loopback interface.

    pip install 'prunewarden[prometheus,otel]'
    python examples/observability/agent_loop.py --port 9464 --serve 60

``tests/test_observability.py`` runs it and checks that ``/metrics`` says what the audit log
says.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from prometheus_client import CollectorRegistry, start_http_server
from prunewarden import AuditLog, Engine, Session, load_policy
from prunewarden.metrics import DecisionMetrics
from prunewarden.tracing import CallSpans, current_trace_context

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted((ROOT / "examples" / "traces").glob("*.jsonl"))
POLICY = ROOT / "policies" / "default.yaml"


def run_agent(
    traces: Sequence[str | Path],
    audit_path: str | Path,
    metrics: DecisionMetrics,
    *,
    policy: str | Path = POLICY,
    tracer_provider: trace.TracerProvider | None = None,
) -> int:
    """Play each trace as one agent session; return the number of steps taken."""
    tracer = trace.get_tracer("agent", tracer_provider=tracer_provider)
    steps = 0
    with AuditLog(str(audit_path)) as audit:
        engine = Engine(
            load_policy(policy),
            audit=audit,
            on_decision=metrics,
            on_call=CallSpans(tracer_provider),
            trace_context=current_trace_context,
        )
        for path in traces:
            header, *events = [json.loads(line) for line in Path(path).read_text().splitlines()]
            session = engine.session(header["session_id"], header.get("labels", {}))
            for event in events:
                with tracer.start_as_current_span(f"agent.{event['type']}"):
                    step(session, metrics, event)
                steps += 1
    return steps


def step(session: Session, metrics: DecisionMetrics, event: dict[str, Any]) -> None:
    """One agent step: the session call the event stands for."""
    fields = {k: v for k, v in event.items() if k not in ("type", "note")}
    kind = event["type"]
    if kind == "cycle":
        session.observe_cycle(fields["scores"], fields.get("pinned", ()), cycle=fields.get("cycle"))
    elif kind == "turn":
        session.observe_turn(fields["mean_relevance"], fields["tokens"], turn=fields.get("turn"))
    elif kind == "eviction":
        session.authorize(
            fields["segment"],
            fields["score"],
            fields.get("perturbed_score"),
            fields.get("eviction_candidates", ()),
        )
    elif kind == "prune":
        options = {k: fields[k] for k in ("turn", "tombstones", "recompute_budget") if k in fields}
        session.prune(fields["spans"], fields["keep_top_k"], **options)
    else:  # a pruning pass: its totals go to the metrics
        segments = fields.pop("segments")
        metrics.observe_plan(session.plan(segments, **fields))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--serve", type=float, default=0.0, help="seconds to keep serving")
    parser.add_argument("--audit-log", help="where to write the audit log (default: a temp dir)")
    args = parser.parse_args(argv)
    registry = CollectorRegistry()
    metrics = DecisionMetrics(registry)
    server, thread = start_http_server(args.port, addr="127.0.0.1", registry=registry)
    print(f"serving http://127.0.0.1:{server.server_port}/metrics")
    with tempfile.TemporaryDirectory() as scratch:
        audit = args.audit_log or str(Path(scratch) / "audit.jsonl")
        steps = run_agent(TRACES, audit, metrics)
        print(f"{steps} steps of {len(TRACES)} sessions; audit log {audit}")
        time.sleep(args.serve)
    server.shutdown()
    server.server_close()
    thread.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
