"""Prometheus metrics kept by a decision hook, read back through prometheus-client's parser."""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prunewarden import (
    AuditLog,
    Decision,
    Engine,
    PassResult,
    ReloadingEngine,
    load_policy,
    parse_policy,
)
from prunewarden.engine import DecisionHook
from prunewarden.metrics import DecisionMetrics
from prunewarden.pipeline import Pipeline
from prunewarden.replay import replay_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = sorted((ROOT / "examples" / "traces").glob("*.jsonl"))
EVICTION = json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
DEPLOY = ROOT / "examples" / "deployments"


def policy_text(spec: dict[str, Any], version: str) -> str:
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "prod", "version": version},
        "spec": spec,
    }
    return json.dumps(document)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: CollectorRegistry) -> Samples:
    """Every sample of the exposition text, parsed by prometheus-client's own parser."""
    text = generate_latest(registry).decode("utf-8")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def named(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: value for (n, labels), value in samples.items() if n == name}


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> DecisionMetrics:
    return DecisionMetrics(registry)


class TestDecisions:
    def test_counts_match_what_replay_decided(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """Every decision of the example traces counts once, by its bounded labels."""
        engine = Engine.default(on_decision=metrics)
        expected: Counter[tuple[str, str]] = Counter()
        for trace in TRACES:
            summary = replay_trace(engine, str(trace))
            for check, outcomes in summary.outcomes.items():
                for outcome, count in outcomes.items():
                    expected[check, outcome] += count
        decisions = named(scrape(registry), "prunewarden_decisions_total")
        got: Counter[tuple[str, str]] = Counter()
        for labels, value in decisions.items():
            values = dict(labels)
            assert set(values) == {
                "policy",
                "policy_version",
                "check",
                "outcome",
                "reason",
                "enforced",
            }
            assert (values["policy"], values["policy_version"]) == ("default", "1.0.0")
            got[values["check"], values["outcome"]] += int(value)
        assert got == expected
        session_ids = {"seed-000-narrowing", "healthy-session"}
        assert not any(v in session_ids for labels in decisions for _, v in labels)

    def test_duration_histogram_counts_every_decision(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """Each decision's duration lands in its check's histogram; the buckets add up."""
        engine = Engine.default(on_decision=metrics)
        for _ in range(5):
            engine.evaluate(EVICTION)
        samples = scrape(registry)
        count = samples[
            "prunewarden_decision_duration_seconds_count", frozenset({("check", "eviction")})
        ]
        infinite = frozenset({("check", "eviction"), ("le", "+Inf")})
        assert count == samples["prunewarden_decision_duration_seconds_bucket", infinite] == 5
        total = samples[
            "prunewarden_decision_duration_seconds_sum", frozenset({("check", "eviction")})
        ]
        assert 0 < total < 5

    @pytest.mark.usefixtures("metrics")
    def test_every_metric_is_exposed_from_the_start(self, registry: CollectorRegistry) -> None:
        """The issue's metric names are all there before any decision, reload results at 0."""
        names = {
            family.name
            for family in text_string_to_metric_families(generate_latest(registry).decode())
        }
        assert names == {
            "prunewarden_decisions",
            "prunewarden_decision_duration_seconds",
            "prunewarden_pass_evicted_segments",
            "prunewarden_pass_freed_tokens",
            "prunewarden_pass_frozen",
            "prunewarden_sessions_halted",
            "prunewarden_halt_episodes",
            "prunewarden_policy_info",
            "prunewarden_policy_reloads",
            "prunewarden_audit_write_failures",
            "prunewarden_rule_errors",
            "prunewarden_shadow_disagreements",
        }
        reloads = named(scrape(registry), "prunewarden_policy_reloads_total")
        assert sorted((dict(k)["result"], v) for k, v in reloads.items()) == [
            ("failed", 0.0),
            ("reloaded", 0.0),
            ("unchanged", 0.0),
        ]

    def test_the_default_registry_is_the_global_one(self) -> None:
        """Without a registry, the metrics register on prometheus-client's REGISTRY."""
        metrics = DecisionMetrics()
        try:
            assert metrics.registry is prometheus_client.REGISTRY
            Engine.default(on_decision=metrics).evaluate(EVICTION)
            text = generate_latest().decode()
            assert 'prunewarden_decisions_total{check="eviction"' in text
        finally:
            prometheus_client.REGISTRY.unregister(metrics)

    def test_one_instance_per_registry(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """A second instance on the same registry is refused, as prometheus-client does."""
        assert metrics.registry is registry
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            DecisionMetrics(registry)

    def test_threads_lose_no_count(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """Decisions from several threads all count."""
        engine = Engine.default(on_decision=metrics)
        workers = [
            threading.Thread(target=lambda: [engine.evaluate(EVICTION) for _ in range(50)])
            for _ in range(4)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        decisions = named(scrape(registry), "prunewarden_decisions_total")
        assert sum(decisions.values()) == 200


class TestHalts:
    def test_a_session_halt_is_one_episode_and_a_halted_session(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """The narrowing trace halts for three cycles: one episode, one session halted."""
        engine = Engine.default(on_decision=metrics)
        replay_trace(engine, str(ROOT / "examples" / "traces" / "collapse-narrowing.jsonl"))
        samples = scrape(registry)
        assert samples["prunewarden_halt_episodes_total", frozenset()] == 1
        assert samples["prunewarden_sessions_halted", frozenset()] == 1

    def test_a_healthy_cycle_lifts_the_halt(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """The gauge follows the session's last collapse decision."""
        engine = Engine.default(on_decision=metrics)
        session = engine.session("s-1")
        narrowing = ROOT / "examples" / "traces" / "collapse-narrowing.jsonl"
        cycles = [json.loads(line) for line in narrowing.read_text().splitlines()]
        for cycle in [c for c in cycles if c["type"] == "cycle"]:
            session.observe_cycle(cycle["scores"], cycle["pinned"], cycle=cycle["cycle"])
        assert scrape(registry)["prunewarden_sessions_halted", frozenset()] == 1
        healthy = {f"e{i}": i / 10 for i in range(10)} | {"task": 0.95}
        session.observe_cycle(healthy, ["task"], cycle=100)
        samples = scrape(registry)
        assert samples["prunewarden_sessions_halted", frozenset()] == 0
        assert samples["prunewarden_halt_episodes_total", frozenset()] == 1


class TestFailures:
    def test_rule_errors_by_rule(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """A rule that fails to evaluate counts under its name, whatever its position."""
        rule = {"name": "w", "check": "eviction", "when": "segment.metadata.x == 1"}
        rules = [{**rule, "effect": "warn", "message": "m"}]
        policy = parse_policy(policy_text({"rules": rules}, "1.0.0"), "rules.yaml")
        Engine(policy, on_decision=metrics).evaluate(EVICTION)
        errors = named(scrape(registry), "prunewarden_rule_errors_total")
        assert errors == {frozenset({("rule", "w")}): 1.0}

    def test_audit_write_failures(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """A decision the audit log could not record is refused and counted."""

        class Broken(io.StringIO):
            def write(self, text: str) -> int:  # noqa: ARG002 - nothing is written
                raise OSError(28, "No space left on device")

        engine = Engine.default(audit=AuditLog(Broken()), on_decision=metrics)
        assert engine.evaluate(EVICTION).codes[0] == "audit_unavailable"
        assert scrape(registry)["prunewarden_audit_write_failures_total", frozenset()] == 1

    def test_shadow_disagreements_by_candidate_version(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """The prod-eu candidate denies what prod-eu allows: one disagreement, by version."""
        engine = Engine(
            load_policy(DEPLOY / "prod-eu.yaml"),
            shadow=load_policy(DEPLOY / "prod-eu-candidate.yaml"),
            on_decision=metrics,
        )
        engine.evaluate(
            json.loads((ROOT / "examples" / "inputs" / "eviction-healthy.json").read_text())
        )
        found = named(scrape(registry), "prunewarden_shadow_disagreements_total")
        assert found == {frozenset({("candidate_version", "1.5.0")}): 1.0}


class TestPassesAndReloads:
    def test_plans_count_evictions_freed_tokens_and_freezes(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """observe_plan adds a pass's evictions and tokens, or its freeze by reason."""
        engine = Engine.default(on_decision=metrics)
        window = json.loads((ROOT / "examples" / "windows" / "free-30k-tokens.json").read_text())
        plan = engine.plan(window)
        assert plan.evict
        metrics.observe_plan(plan)
        samples = scrape(registry)
        assert samples["prunewarden_pass_evicted_segments_total", frozenset()] == len(plan.evict)
        assert samples["prunewarden_pass_freed_tokens_total", frozenset()] == plan.freed_tokens
        unbound = [{k: v for k, v in s.items() if k != "text_sha256"} for s in window["segments"]]
        frozen = engine.plan({**window, "segments": unbound})
        assert frozen.frozen
        metrics.observe_plan(frozen)
        reasons = named(scrape(registry), "prunewarden_pass_frozen_total")
        assert reasons == {frozenset({("reason", "unbound_score")}): 1.0}

    def test_watched_reloads_and_the_policy_in_force(
        self, tmp_path: Path, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """Reloads count by result; policy_info shows the version in force only."""
        path = tmp_path / "prod.yaml"
        path.write_text(policy_text({}, "1.0.0"))
        newer = policy_text({"eviction": {"stability_delta": 0.1}}, "1.1.0")
        with ReloadingEngine(path, interval=0, on_decision=metrics) as reloading:
            metrics.watch(reloading)
            path.write_text(newer)
            reloading.reload()
            path.write_text("apiVersion: [\n")
            reloading.reload()
            reloading.evaluate(EVICTION)
        samples = scrape(registry)
        reloads = {
            dict(k)["result"]: v
            for k, v in named(samples, "prunewarden_policy_reloads_total").items()
        }
        assert reloads == {"reloaded": 1.0, "failed": 1.0, "unchanged": 0.0}
        info = named(samples, "prunewarden_policy_info")
        (labels,) = info
        assert dict(labels)["version"] == "1.1.0"
        assert dict(labels)["digest"] == parse_policy(newer, str(path)).digest


class SpiedMetrics(DecisionMetrics):
    """DecisionMetrics remembering the size of every batch and every pass it counted."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.batch_sizes: list[int] = []
        self.pass_sizes: list[int] = []

    def observe_decisions(self, decisions: Sequence[Decision], record: Mapping[str, Any]) -> None:
        self.batch_sizes.append(len(decisions))
        super().observe_decisions(decisions, record)

    def on_pass(self, result: PassResult) -> None:
        self.pass_sizes.append(len(result))
        super().on_pass(result)


def pass_items(count: int) -> list[dict[str, Any]]:
    """Eviction items alternating between allowed and refused (no tombstone)."""
    return [
        {
            "segment": {"id": f"s{i}", "kind": "turn", "tombstone_written": i % 2 == 0},
            "score": 0.08,
            "perturbed_score": 0.1,
        }
        for i in range(count)
    ]


class TestBatchPath:
    def test_a_pass_counted_at_once_exposes_what_one_by_one_does(self) -> None:
        """Passes counted through the batch method (or from their columns, on_pass) and the
        same passes counted decision by decision expose the same families, labels and values,
        byte for byte: allows and refusals, shadow disagreements, rule errors, refusals of an
        unwritable log, a halting collapse gate and the duration histogram."""
        batch, single = SpiedMetrics(CollectorRegistry()), SpiedMetrics(CollectorRegistry())

        def one_by_one(decision: Decision, record: Mapping[str, Any]) -> None:
            single(decision, record)  # a plain callable: the engine calls it per decision

        hooks: list[DecisionHook] = [batch, one_by_one]
        shadowed = Engine(
            load_policy(DEPLOY / "prod-eu.yaml"),
            shadow=load_policy(DEPLOY / "prod-eu-candidate.yaml"),
            on_decision=hooks,
        )
        shadowed.authorize_evictions(pass_items(12), session_id="s-1")
        rule = {"name": "w", "check": "eviction", "when": "segment.metadata.x == 1"}
        rules = [{**rule, "effect": "warn", "message": "m"}]
        ruled = Engine(
            parse_policy(policy_text({"rules": rules}, "2.0.0"), "rules.yaml"), on_decision=hooks
        )
        ruled.authorize_evictions(pass_items(5))
        unwritable = io.StringIO()
        refusing = Engine.default(audit=AuditLog(unwritable), on_decision=hooks)
        unwritable.close()
        refusing.authorize_evictions(pass_items(4))
        columnar = Engine.default(audit=AuditLog(io.StringIO()), on_decision=hooks)
        columnar.authorize_pass(pass_items(7), session_id="s-2")
        narrowing = ROOT / "examples" / "traces" / "collapse-narrowing.jsonl"
        cycles = [json.loads(line) for line in narrowing.read_text().splitlines()]
        history = [
            {k: v for k, v in c.items() if k != "type"} for c in cycles if c["type"] == "cycle"
        ]
        window = json.loads((ROOT / "examples" / "windows" / "free-30k-tokens.json").read_text())
        planner = Engine.default(on_decision=hooks)
        planner.plan(window)
        planner.plan({**window, "history": history})
        planner.evaluate(EVICTION)

        exposed = generate_latest(batch.registry)
        assert exposed == generate_latest(single.registry)
        assert batch.batch_sizes == [12, 5, 20, 1, 1]
        assert batch.pass_sizes == [12, 5, 4, 7]
        assert set(single.batch_sizes) == {1}
        samples = scrape(batch.registry)
        assert sum(named(samples, "prunewarden_decisions_total").values()) == sum(
            single.batch_sizes
        )
        assert samples["prunewarden_audit_write_failures_total", frozenset()] == 4
        assert named(samples, "prunewarden_rule_errors_total") == {frozenset({("rule", "w")}): 5}
        assert named(samples, "prunewarden_shadow_disagreements_total")
        assert samples["prunewarden_halt_episodes_total", frozenset()] == 1

    def test_a_columnar_pass_is_counted_without_building_a_decision(
        self, monkeypatch: pytest.MonkeyPatch, registry: CollectorRegistry
    ) -> None:
        """on_pass counts an eviction pass from its columns: no Decision is built, and the
        counts say one allow and one refusal per pair of segments."""
        built: list[object] = []
        decide = Pipeline.decide

        def counting(self: Pipeline, request: Any, *args: Any, **kwargs: Any) -> Decision:
            built.append(request)
            return decide(self, request, *args, **kwargs)

        monkeypatch.setattr(Pipeline, "decide", counting)
        metrics = DecisionMetrics(registry)
        Engine.default(audit=AuditLog(io.StringIO()), on_decision=metrics).authorize_pass(
            pass_items(6)
        )
        assert built == []
        counted = {
            dict(labels)["reason"]: value
            for labels, value in named(scrape(registry), "prunewarden_decisions_total").items()
        }
        assert counted == {"authorized": 3.0, "no_tombstone": 3.0}


class TestTransitions:
    def test_a_transition_counts_under_its_check_and_first_reason(
        self, registry: CollectorRegistry, metrics: DecisionMetrics
    ) -> None:
        """A refused transition is one decision of check transition, labelled by its first
        reason, and its time goes to the transition histogram."""
        document = json.loads((ROOT / "examples" / "inputs" / TRANSITION).read_text())
        decision = Engine.default(on_decision=metrics).evaluate(document)
        samples = scrape(registry)
        (labels,) = named(samples, "prunewarden_decisions_total")
        assert dict(labels)["check"] == "transition"
        assert dict(labels)["outcome"] == decision.outcome == "deny"
        assert dict(labels)["reason"] == decision.codes[0]
        counts = named(samples, "prunewarden_decision_duration_seconds_count")
        assert counts == {frozenset({("check", "transition")}): 1.0}


TRANSITION = "transition-trim-dropped-task.json"
