"""The whole loop: an agent served on /metrics agrees with its audit log; the spans name the same
decisions; and without the extras nothing of them is installed or imported."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families
from prunewarden.audit import decision_rows
from prunewarden.metrics import DecisionMetrics

ROOT = Path(__file__).resolve().parent.parent
EXTRA_MODULES = ("prometheus_client", "opentelemetry", "matplotlib")


def load_example() -> ModuleType:
    path = ROOT / "examples" / "observability" / "agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The example loop over every example trace, /metrics served on loopback, spans kept."""
    example = load_example()
    registry = CollectorRegistry()
    metrics = DecisionMetrics(registry)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    audit = tmp_path_factory.mktemp("loop") / "audit.jsonl"
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        steps = example.run_agent(example.TRACES, audit, metrics, tracer_provider=provider)
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode("utf-8")
        lines = [json.loads(line) for line in audit.read_text().splitlines()]
        yield {
            "steps": steps,
            "text": text,
            "records": [r for r in lines if r["kind"] in ("decision", "pass")],
            "decisions": list(decisions_in(lines)),
            "spans": exporter.get_finished_spans(),
        }
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def decisions_in(lines: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every decision the log records: a decision record, or one verdict of a pass record
    (whose decision ids are the pass id and the verdict's index)."""
    for record in lines:
        policy = record.get("policy", {})
        common = {
            "policy": policy.get("name"),
            "policy_version": policy.get("version"),
            "session_id": record.get("session_id"),
        }
        if record["kind"] == "decision":
            yield {
                **common,
                "decision_id": record["decision_id"],
                "check": record["check"],
                "outcome": record["outcome"],
                "enforced": record["enforced"],
                "reason": record["reasons"][0]["code"],
            }
        elif record["kind"] == "pass":
            # Its verdicts, or its columns (record_version 3), as the readers see them.
            for row in decision_rows(record):
                yield {
                    **common,
                    "decision_id": row["decision_id"],
                    "check": row["check"],
                    "outcome": row["outcome"],
                    "enforced": row["enforced"],
                    "reason": row["reasons"][0]["code"],
                }


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


class TestAgentLoop:
    def test_metrics_match_the_audit_log(self, run: dict[str, Any]) -> None:
        """Per policy, version, check, outcome, primary reason and enforcement, /metrics counts
        exactly the decision records of the same run."""
        from_log: Counter[tuple[tuple[str, str], ...]] = Counter()
        for decision in run["decisions"]:
            labels = {
                "policy": decision["policy"],
                "policy_version": decision["policy_version"],
                "check": decision["check"],
                "outcome": decision["outcome"],
                "reason": decision["reason"],
                "enforced": "true" if decision["enforced"] else "false",
            }
            from_log[tuple(sorted(labels.items()))] += 1
        served = samples(run["text"], "prunewarden_decisions_total")
        assert served == {key: float(count) for key, count in from_log.items()}
        assert len(run["decisions"]) > 50

    def test_durations_and_halts_match_the_audit_log(self, run: dict[str, Any]) -> None:
        """The histograms count every decision; halt episodes are the sessions that halted."""
        counts = samples(run["text"], "prunewarden_decision_duration_seconds_count")
        by_check = Counter(decision["check"] for decision in run["decisions"])
        assert {dict(k)["check"]: v for k, v in counts.items()} == by_check
        halted = {
            d["session_id"]
            for d in run["decisions"]
            if d["check"] == "collapse" and d["outcome"] == "halt" and d["enforced"]
        }
        assert samples(run["text"], "prunewarden_halt_episodes_total") == {(): len(halted)}

    def test_spans_carry_the_records_decision_ids(self, run: dict[str, Any]) -> None:
        """Every decision of the log is named by a span, and no span names another."""
        in_spans: list[str] = []
        for span in run["spans"]:
            attributes = dict(span.attributes or {})
            if span.name.startswith("prunewarden."):
                in_spans += list(attributes.get("prunewarden.decision_ids", ())) or [
                    str(attributes["prunewarden.decision_id"])
                ]
        assert sorted(in_spans) == sorted(d["decision_id"] for d in run["decisions"])

    def test_records_join_the_agents_trace(self, run: dict[str, Any]) -> None:
        """Each record names the agent step's trace and span it was made in."""
        steps = {
            (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"))
            for s in run["spans"]
            if s.name.startswith("agent.")
        }
        assert all((r["trace_id"], r["span_id"]) in steps for r in run["records"])


class TestWithoutExtras:
    def test_import_pulls_none_of_the_extras(self) -> None:
        """import prunewarden, and deciding, import neither prometheus-client, OpenTelemetry
        nor matplotlib."""
        script = (
            "import sys, prunewarden; "
            "prunewarden.Engine.default().session('s').observe_cycle({'a': 0.1, 'b': 0.9}); "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {EXTRA_MODULES!r}))"
        )
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        assert result.stdout == "[]\n"

    def test_the_extras_are_only_extras(self) -> None:
        """The package requires prometheus-client, OpenTelemetry and matplotlib only through
        its extras: pip install . pulls none of them."""
        requirements = importlib.metadata.requires("prunewarden") or []
        for name in ("prometheus-client", "opentelemetry-api", "matplotlib"):
            found = [r for r in requirements if r.lower().startswith(name)]
            assert found, name
            assert all("extra ==" in r for r in found), found
        extras = importlib.metadata.metadata("prunewarden").get_all("Provides-Extra") or []
        assert {"plot", "prometheus", "otel"} <= set(extras)
