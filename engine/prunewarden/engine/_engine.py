"""The engine's calls: one compiled policy, documents in, decisions out.

Each call parses its document and hands the request to the engine's parts, which it builds from
its settings and holds (``Engine`` stays the one thing a caller builds): a ``Decider`` decides it
(gated by a halted session, beside a shadow policy), a ``DecisionRecorder`` writes its record to
the sink the caller chose, a ``PassRunner`` decides and records eviction passes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from prunewarden._observation import CallHook, TraceContext, call_hooks, public_call
from prunewarden.audit import (
    AuditLog,
    session_state_rejected_record,
)
from prunewarden.decision import Decision
from prunewarden.engine._deciding import Decider
from prunewarden.engine._hooks import DecisionHook, DecisionHooks
from prunewarden.engine._passes import PassRunner
from prunewarden.engine._recording import DecisionRecorder
from prunewarden.errors import REFUSALS, SessionIntegrityError
from prunewarden.fidelity import Embedder, Judge
from prunewarden.inputs import (
    TransitionRequest,
    check_caller_fields,
    eviction_document,
    parse_plan,
    parse_request_encoded,
    staleness_document,
)
from prunewarden.inputs._columns import staleness_columns
from prunewarden.pipeline import (
    PassResult,
    Shadow,
    columnar_eviction,
    compile_policy,
)
from prunewarden.planner import Plan
from prunewarden.policy import Policy, load_builtin_policy, load_policy
from prunewarden.rules import DEFAULT_CACHE_SIZE, check_backend
from prunewarden.session import (
    Binder,
    Session,
    SessionBinding,
    SessionRegistry,
    SessionStore,
)

_diagnostics = logging.getLogger("prunewarden")


class Engine:
    """Evaluates input documents against one policy and logs every decision it makes.

    Records go to ``audit`` (an :class:`AuditLog`: a chained, locked file or a stream) when one is
    given, else to the structlog ``logger`` when one is given (``audit.get_logger()`` is the
    ``prunewarden`` logger of the application's structlog configuration), else nowhere. Each
    ``on_decision`` hook (a callable, or several) receives every decision and its record,
    whatever the sink; a hook that raises is reported to ``logging.getLogger("prunewarden")``
    and never changes a decision.

    Each ``on_call`` hook gets every public call in which a decision was made, once, with all
    its decisions and records (a :class:`~prunewarden._observation.Call`): what one span per
    call is made from (:class:`prunewarden.tracing.CallSpans`).

    ``trace_context`` (:func:`prunewarden.tracing.current_trace_context`) is asked, as each
    record is built, for the caller's current trace and span ids, which the record keeps
    (``trace_id``, ``span_id``); every record also keeps ``duration_ns``, the time spent deciding.

    ``store`` (a :class:`~prunewarden.session.SessionStore`) keeps the state of every session
    :meth:`session` opens, and a stateless call naming a session id is refused while the live
    session or the store holds that session halted (``pruning_halted``).

    ``cel`` chooses the CEL backend of the policy's rules: ``"python"`` (cel-python, the
    default) or ``"native"`` (cel-cpp, the ``cel-native`` extra); None reads the environment
    variable ``PRUNEWARDEN_CEL``. Every decision record of a policy with rules names it (``cel``).

    ``embedder`` (a :class:`prunewarden.fidelity.Embedder`) is what the fidelity check's meaning
    method (``spec.fidelity.method`` ``embedding`` or ``both``) embeds sentences with; without
    one, that method refuses every summary it checks (docs/fidelity.md). ``judge`` (a
    :data:`prunewarden.fidelity.Judge`, ``judge(parent_text, child_text) -> bool``) is the
    harness's own entailment check that ``method: judge`` asks instead of the facts; without one,
    that method refuses likewise.

    With ``shadow``, a candidate policy decides every request too; what it decided is recorded
    beside the decision and never changes it (see :mod:`prunewarden.pipeline`).

    Thread-safe: the compiled policy is immutable, each call keeps its state on the stack, and an
    audit log serializes its writers.
    """

    def __init__(  # noqa: PLR0913 - each setting is independent and keyword-only
        self,
        policy: Policy,
        *,
        logger: Any = None,
        rule_cache_size: int = DEFAULT_CACHE_SIZE,
        audit: AuditLog | None = None,
        shadow: Policy | None = None,
        on_decision: DecisionHook | Iterable[DecisionHook] | None = None,
        on_call: CallHook | Iterable[CallHook] | None = None,
        trace_context: TraceContext | None = None,
        store: SessionStore | None = None,
        sessions: SessionRegistry | None = None,
        cel: str | None = None,
        embedder: Embedder | None = None,
        judge: Judge | None = None,
    ) -> None:
        self.policy = policy
        # The CEL backend of the rules; asked for and missing, it is an error here, never a
        # silent fall back to the other one.
        self.cel = check_backend(cel)
        self.embedder = embedder
        self.judge = judge
        self._pipelines = compile_policy(
            policy, rule_cache_size=rule_cache_size, cel=self.cel, embedder=embedder, judge=judge
        )
        # Live sessions and the store, shared with the engines that replace this one on reload.
        self.sessions = sessions if sessions is not None else SessionRegistry(store)
        if store is not None:
            self.sessions.store = store
        self.audit = audit
        if audit is not None:
            audit.add_policy(policy)
        # A candidate decided beside the active policy and recorded, never enforced.
        self.shadow = (
            None
            if shadow is None
            else Shadow(
                shadow,
                rule_cache_size=rule_cache_size,
                cel=self.cel,
                embedder=embedder,
                judge=judge,
            )
        )
        if audit is not None and shadow is not None:
            audit.add_policy(shadow)
        self._compose(DecisionHooks(on_decision, call_hooks(on_call)), logger, trace_context)
        # A staleness document may be decided over its columns when nothing but the guard
        # reads the request: no rule, no calibration, no shadow policy.
        self._staleness_columns = self._pipelines["staleness"].plain and self.shadow is None

    def _compose(
        self, hooks: DecisionHooks, logger: Any, trace_context: TraceContext | None
    ) -> None:
        """Build the parts this engine holds, each handed what it needs."""
        policy, pipelines = self.policy, self._pipelines
        # The one place records are written: its sinks, hooks and the policies they name.
        self.recorder = DecisionRecorder(
            policy,
            pipelines,
            audit=self.audit,
            logger=logger,
            hooks=hooks,
            trace_context=trace_context,
            shadow_policy=self.shadow.policy if self.shadow is not None else None,
            cel=self.cel,
        )
        # One request decided and logged: the step every call and every session decides with.
        self.decider = Decider(policy, pipelines, self.shadow, self.sessions, self.recorder)
        # Eviction passes, with the policy's eviction settings bound once for passes decided
        # over columns (None: its passes take the general path; see engine._passes).
        self.passes = PassRunner(
            policy,
            self.recorder,
            self.sessions,
            self.decider.decide,
            columnar_eviction(pipelines, policy, shadow=self.shadow is not None),
        )
        self.session_binding = SessionBinding(
            policy,
            self.decider.decide,
            self.recorder.write_record,
            self.recorder.record_plan,
            self.passes.plan_columns,
        )

    @classmethod
    def default(cls, **kwargs: Any) -> Engine:
        """An engine on the bundled default policy (the source documents' thresholds)."""
        return cls(load_builtin_policy("default"), **kwargs)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> Engine:
        return cls(load_policy(path), **kwargs)

    @public_call("prunewarden.evaluate")
    def evaluate(  # noqa: PLR0913 - each option is keyword-only and independent
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Decision:
        """Decide on one input document (``{"check": ..., ...}``).

        ``session_id`` and ``labels`` (strings) are copied into the decision's audit record (the
        document's own ``labels``, and a transition document's ``session_id``, when these are
        not given).
        ``explain``: each refusing reason of the guard carries ``detail.would_allow`` (what would
        have allowed it) and the decision an ``explanation`` tracing every rule (docs/explain.md);
        off, neither is computed.
        Raises :class:`InputError` for a malformed document (or session id or labels); every
        other failure, in a guard or in the logger, becomes a refusing decision.
        """
        check_caller_fields(session_id, labels)
        data = dict(document) if isinstance(document, Mapping) else document
        if session_id is None and not explain and self._staleness_columns:
            read = staleness_columns(data, self.policy.spec.scores)
            if read is not None:
                return self.decider.decide_staleness(read, data, labels)
        check, request, encoded = parse_request_encoded(
            data, self.policy.spec.scores, filename=filename, text=text
        )
        if isinstance(request, TransitionRequest):
            # A transition document names its session; the caller's overrides it.
            session_id = session_id if session_id is not None else request.session_id
        if labels is None and "labels" in data:
            # Every decision document may carry labels (validated: strings to strings).
            labels = dict(data["labels"])
        return self.decider.decide(
            check,
            request,
            data,
            session_id=session_id,
            labels=labels,
            encoded=encoded,
            explain=explain,
        )

    def session(
        self,
        session_id: str,
        labels: Mapping[str, str] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        store: SessionStore | None = None,
    ) -> Session:
        """A stateful view for one agent session: feed it cycles and turns as they happen, ask it
        to authorize, prune and plan with the history it kept (bounded by the policy).

        ``state`` (a ``Session.state()`` snapshot) restores a session; ``store`` (else the
        engine's) loads the session's saved state, or creates it, and saves every change. A state
        kept under another policy is carried over where this policy's windows can use it (one
        ``session_rebound`` record); otherwise :class:`SessionStateError` says what cannot be.
        """
        return self.open_session(session_id, labels, state=state, store=store)

    def open_session(
        self,
        session_id: str,
        labels: Mapping[str, str] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        store: SessionStore | None = None,
        bind: Binder | None = None,
    ) -> Session:
        """:meth:`session`, deciding through ``bind`` (a callable returning the binding in force:
        a ``ReloadingEngine`` passes its own, so that the session follows reloads)."""
        check_caller_fields(session_id, labels)
        store = store if store is not None else self.sessions.store
        binder: Binder = bind if bind is not None else self._bound
        if state is None and store is not None:
            try:
                state = store.load(session_id)
            except SessionIntegrityError as exc:
                self.report_rejected_state(session_id, exc)
                raise
        session = Session(
            binder, session_id, dict(labels or {}), store=store, registry=self.sessions
        )
        if state is not None:
            session.restore(state, keep_labels=labels is not None)
        session.save()
        return session

    def report_rejected_state(
        self, session_id: str, error: SessionIntegrityError, *, deleted: bool = False
    ) -> None:
        """Record (``session_state_rejected``) that a stored state of ``session_id`` was refused,
        or cleared by a delete (``deleted``). A failure to record is logged; the refusal
        stands either way."""
        record = session_state_rejected_record(
            session_id, [str(p) for p in error.problems], deleted=deleted
        )
        try:
            self.recorder.write_record(record)
        except Exception:  # noqa: BLE001 - the refusal stands; the failure is reported
            _diagnostics.exception("session_state_rejected could not be recorded")

    def _bound(self) -> SessionBinding:
        return self.session_binding

    @public_call("prunewarden.plan")
    def plan(  # noqa: PLR0913 - each option is keyword-only and independent
        self,
        document: Mapping[str, Any],
        *,
        filename: str = "<input>",
        text: str | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        explain: bool = False,
    ) -> Plan:
        """Plan one pruning pass over a window (``prunewarden plan``): the collapse gate (on the
        document's ``history``), the staleness gate, then authorized evictions up to the target.

        ``session_id`` and ``labels`` override the document's own; ``explain``: every decision of
        the pass explained, as :meth:`evaluate`'s.
        """
        check_caller_fields(session_id, labels)
        data = dict(document) if isinstance(document, Mapping) else document
        request = parse_plan(data, self.policy.spec.scores, filename=filename, text=text)
        # A session for this one pass: its decisions are stateless calls (a halted session of
        # the same id refuses them).
        session = Session(
            self._bound,
            session_id if session_id is not None else request.session_id,
            dict(labels if labels is not None else request.labels),
            stateless=True,
        )
        return session.plan_request(request, data, explain=explain)

    @public_call("prunewarden.enforce")
    def enforce(
        self,
        document: Mapping[str, Any],
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Like :meth:`evaluate`, but raise when an enforced guard refuses.

        Raises :class:`RelevanceCollapseError`, :class:`UntrustedEvictionError`,
        :class:`StaleScoreError` or :class:`UnsafeTransitionError`, each carrying the decision.
        """
        decision = self.evaluate(document, session_id=session_id, labels=labels)
        if decision.blocks:
            raise REFUSALS[decision.check](decision)
        return decision

    @public_call("prunewarden.detect_collapse")
    def detect_collapse(
        self,
        history: Iterable[Mapping[str, Any]],
        baseline: Mapping[str, float] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Collapse guard: ``history`` of ``{cycle, scores, pinned}`` snapshots, oldest first."""
        document: dict[str, Any] = {"check": "collapse", "history": [dict(s) for s in history]}
        if baseline is not None:
            document["baseline"] = dict(baseline)
        return self.evaluate(document, session_id=session_id, labels=labels)

    @public_call("prunewarden.authorize_eviction")
    def authorize_eviction(  # noqa: PLR0913 - mirrors the eviction document's fields
        self,
        segment: Mapping[str, Any],
        score: float,
        perturbed_score: float | None = None,
        eviction_candidates: Iterable[str] = (),
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Eviction guard for one segment scheduled for deletion."""
        return self.evaluate(
            eviction_document(segment, score, perturbed_score, eviction_candidates),
            session_id=session_id,
            labels=labels,
        )

    @public_call("prunewarden.authorize_evictions")
    def authorize_evictions(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> tuple[Decision, ...]:
        """Eviction guard for a whole pruning pass: one decision per item
        ``{"segment", "score", "perturbed_score"}``, in order, and one audit record for the
        pass (its decisions are ``<pass_id>-<index>``). :meth:`authorize_pass`, every decision
        built.

        Every segment of the pass is an eviction candidate unless ``eviction_candidates`` says
        otherwise. The pass is validated first, as a whole: a malformed item raises
        :class:`InputError` (paths ``$.evictions[i]...``) before anything is decided or logged.
        The record digests the pass document ``{"evictions": [...], "eviction_candidates":
        [...]}``. When it cannot be written (and the audit log is required), every decision of
        the pass is a refusal.
        """
        return tuple(
            self.authorize_pass(
                evictions, eviction_candidates, session_id=session_id, labels=labels
            )
        )

    @public_call("prunewarden.authorize_pass")
    def authorize_pass(
        self,
        evictions: Iterable[Mapping[str, Any]],
        eviction_candidates: Iterable[str] | None = None,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PassResult:
        """:meth:`authorize_evictions`, answered as columns: a :class:`PassResult` with
        ``allowed``, ``evict_ids``, ``codes`` and ``pass_id``, whose ``result[i]`` is the
        decision on item ``i`` (built when first read, equal to the one
        :meth:`authorize_evictions` returns). Same validation, same refusals, one record."""
        return self.passes.authorize_pass(evictions, eviction_candidates, session_id, labels)

    @public_call("prunewarden.prune")
    def prune(  # noqa: PLR0913 - mirrors the staleness document's optional fields
        self,
        spans: Iterable[Mapping[str, Any]],
        keep_top_k: int,
        *,
        turn: Mapping[str, int] | None = None,
        turns: Iterable[Mapping[str, Any]] | None = None,
        tombstones: Iterable[str] = (),
        recompute_budget: int | None = None,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Decision:
        """Staleness guard for a prune request; on allow, ``kept`` and ``evicted`` say what to
        do."""
        document = staleness_document(
            spans,
            keep_top_k,
            turn=turn,
            turns=turns,
            tombstones=tombstones,
            recompute_budget=recompute_budget,
        )
        return self.evaluate(document, session_id=session_id, labels=labels)
