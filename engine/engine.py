"""The engine: one compiled policy, documents in, logged decisions out."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from prunewarden.auditlog import get_logger, log_decision
from prunewarden.batch import parse_evictions
from prunewarden.compiler import Pipeline, compile_policy
from prunewarden.decision import Decision, Reason
from prunewarden.errors import (
    RefusedError,
    RelevanceCollapseError,
    StaleScoreError,
    UntrustedEvictionError,
)
from prunewarden.inputs import parse_request
from prunewarden.policy import Policy, load_builtin_policy, load_policy
from prunewarden.rules import DEFAULT_CACHE_SIZE

_REFUSALS: dict[str, type[RefusedError]] = {
    "collapse": RelevanceCollapseError,
    "eviction": UntrustedEvictionError,
    "staleness": StaleScoreError,
}


class Engine:
    """Evaluates input documents against one policy and logs every decision it makes.

    Thread-safe: the compiled policy is immutable and each call keeps its state on the stack.
    """

    def __init__(
        self, policy: Policy, *, logger: Any = None, rule_cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        self.policy = policy
        self._pipelines = compile_policy(policy, rule_cache_size=rule_cache_size)
        self._logger = logger if logger is not None else get_logger()

    @classmethod
    def default(cls, **kwargs: Any) -> Engine:
        """An engine on the bundled default policy (the source documents' thresholds)."""
        return cls(load_builtin_policy("default"), **kwargs)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> Engine:
        return cls(load_policy(path), **kwargs)

    def evaluate(
        self, document: Mapping[str, Any], *, filename: str = "<input>", text: str | None = None
    ) -> Decision:
        """Decide on one input document (``{"check": ..., ...}``).

        Raises :class:`InputError` for a malformed document; every other failure, in a guard or
        in the logger, becomes a refusing decision.
        """
        data = dict(document) if isinstance(document, Mapping) else document
        check, request = parse_request(data, self.policy.spec.scores, filename=filename, text=text)
        pipeline = self._pipelines[check]
        return self._log(pipeline, pipeline.decide(request))

    def enforce(self, document: Mapping[str, Any]) -> Decision:
        """Like :meth:`evaluate`, but raise when an enforced guard refuses.

        Raises :class:`RelevanceCollapseError`, :class:`UntrustedEvictionError` or
        :class:`StaleScoreError`, each carrying the decision.
        """
        decision = self.evaluate(document)
        if decision.blocks:
            raise _REFUSALS[decision.check](decision)
        return decision

    def detect_collapse(
        self, history: Iterable[Mapping[str, Any]], baseline: Mapping[str, float] | None = None
    ) -> Decision:
        """Collapse guard: ``history`` of ``{cycle, scores, pinned}`` snapshots, oldest first."""
        document: dict[str, Any] = {"check": "collapse", "history": [dict(s) for s in history]}
        if baseline is not None:
            document["baseline"] = dict(baseline)
        return self.evaluate(document)

    def authorize_eviction(
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
    ) -> Decision:
        """Eviction guard for one segment scheduled for deletion."""
        return self.evaluate(
            {
                "check": "eviction",
                "segment": dict(segment),
                "score": score,
                "perturbed_score": perturbed_score,
                "eviction_candidates": list(eviction_candidates),
            }
        )

    def authorize_evictions(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
    ) -> tuple[Decision, ...]:
        """Eviction guard for a whole pruning pass: one logged decision per item
        ``{"segment", "score", "perturbed_score"}``, in order.

        Every segment of the pass is an eviction candidate unless ``eviction_candidates`` says
        otherwise. The pass is validated first, as a whole: a malformed item raises
        :class:`InputError` (paths ``$.evictions[i]...``) before anything is decided or logged.
        """
        requests = parse_evictions(evictions, eviction_candidates, self.policy.spec.scores)
        pipeline = self._pipelines["eviction"]
        return tuple([self._log(pipeline, pipeline.decide(request)) for request in requests])

    def prune(  # noqa: PLR0913 - mirrors the staleness document's optional fields
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        turns: Iterable[Mapping[str, Any]] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
    ) -> Decision:
        """Staleness guard for a prune request; on allow, ``kept`` and ``evicted`` say what to
        do."""
        document: dict[str, Any] = {
            "check": "staleness",
            "spans": [dict(s) for s in spans],
            "keep_top_k": keep_top_k,
            "tombstones": list(tombstones),
        }
        if turn is not None:
            document["turn"] = dict(turn)
        if turns is not None:
            document["turns"] = [dict(t) for t in turns]
        if recompute_budget is not None:
            document["recompute_budget"] = recompute_budget
        return self.evaluate(document)

    def _log(self, pipeline: Pipeline, decision: Decision) -> Decision:
        try:
            log_decision(self._logger, decision)
        except Exception as exc:  # noqa: BLE001 - a decision nobody can audit must not allow
            refusal = pipeline.refuse(
                Reason(
                    "audit_unavailable",
                    f"the decision could not be logged ({type(exc).__name__}); refusing",
                    {"error": type(exc).__name__, "refused_decision": decision.decision_id},
                )
            )
            with contextlib.suppress(Exception):  # the refusal stands whether or not it logs
                log_decision(self._logger, refusal)
            return refusal
        return decision
