"""One request decided and logged: the step every call of an engine, every session bound to it and
every eviction pass decides with.

Kept apart from the calls (:mod:`._engine`), which read documents and choose what to decide,
because this is the one place where a validated request meets the halt of its session, the
policy's pipeline and the shadow policy beside it, and where the decision goes to the
:class:`~prunewarden.engine._recording.DecisionRecorder`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from prunewarden._values import replace_value as replace
from prunewarden.audit import DecisionContext, input_digest, subject_of, texts_of
from prunewarden.audit._input_digest import HASHED_TEXT_DIGEST_VERSION, staleness_digest
from prunewarden.decision import Decision, Verdict
from prunewarden.engine._recording import DecisionRecorder
from prunewarden.inputs import Check, Request, StalenessRequest, TransitionRequest
from prunewarden.inputs._columns import ReadStaleness
from prunewarden.pipeline import Pipeline, Shadow
from prunewarden.planner._log import PassLog
from prunewarden.policy import Policy
from prunewarden.session import SessionRegistry, without_halt


class Decider:
    """Decides a validated request through the policy's pipelines and hands the decision to
    the recorder."""

    __slots__ = ("pipelines", "policy", "recorder", "sessions", "shadow")

    def __init__(
        self,
        policy: Policy,
        pipelines: Mapping[Check, Pipeline],
        shadow: Shadow | None,
        sessions: SessionRegistry,
        recorder: DecisionRecorder,
    ) -> None:
        self.policy = policy
        self.pipelines = pipelines
        self.shadow = shadow
        self.sessions = sessions
        self.recorder = recorder

    def decide(  # noqa: PLR0913 - everything a logged decision is made of
        self,
        check: Check,
        request: Request,
        data: Any,
        *,
        session_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        gate: Verdict | None = None,
        from_session: bool = False,
        in_pass: PassLog | None = None,
        encoded: bytes | None = None,
        explain: bool = False,
    ) -> Decision:
        """Decide on a validated request and log it; ``gate`` refuses without running the guard
        (pruning halted by an earlier collapse decision). A stateless call (not
        ``from_session``) naming a session id is gated by that session's halt. A decision
        ``in_pass`` is stamped with the pass's id and its index, and logged with the pass
        (:class:`PassSink`). ``encoded``: the document as validation serialized it, for the
        input digest (:func:`~prunewarden.inputs.parse_request_encoded`). ``explain``: see
        :meth:`Engine.evaluate`."""
        started = time.perf_counter_ns()
        if gate is None and not from_session and session_id is not None and check != "collapse":
            gate = self.sessions.gate(session_id, check, request)
            if isinstance(request, TransitionRequest):
                request, gate = without_halt(request, gate)
        pipeline = self.pipelines[check]
        stamp = in_pass.next_stamp() if in_pass is not None else None
        if gate is None:
            decision = pipeline.decide(request, stamp, explain=explain)
        else:
            decision = pipeline.to_decision(gate, stamp)
        if self.shadow is not None:
            # The candidate decides the request on its own (no gate: it keeps no session).
            scores = self.policy.spec.scores
            decision = replace(decision, shadow=self.shadow.evaluate(check, request, data, scores))
        if in_pass is not None:
            return in_pass.add(decision, request)
        recorder = self.recorder
        if recorder.silent:
            return decision  # no sink chosen: no record to build
        try:
            if isinstance(request, StalenessRequest):
                digest, digest_version = staleness_digest(data, request)
            else:
                digest, digest_version = input_digest(data, encoded), None
            context = DecisionContext(
                digest,
                subject_of(request),
                session_id,
                labels or {},
                data,
                texts_of(request),
                from_session,
                digest_version,
            )
        except Exception as exc:  # noqa: BLE001 - a record that cannot be built cannot be logged
            return recorder.refuse_unlogged(pipeline, decision, exc)
        return recorder.log(pipeline, decision, context, started)

    def decide_staleness(
        self, read: ReadStaleness, data: Any, labels: Mapping[str, str] | None
    ) -> Decision:
        """:meth:`decide` of a staleness document read into columns (a plain pipeline, no
        shadow, no session): the same decision and record, no span typed one by one."""
        started = time.perf_counter_ns()
        pipeline = self.pipelines["staleness"]
        decision = pipeline.decide_staleness(read.columns)
        recorder = self.recorder
        if recorder.silent:
            return decision
        spans = read.columns.spans
        try:
            context = DecisionContext(
                read.input_digest,
                {"spans": spans.subject()},
                None,
                labels or {},
                data,
                tuple(text for text in spans.texts if text),
                input_digest_version=HASHED_TEXT_DIGEST_VERSION,
            )
        except Exception as exc:  # noqa: BLE001 - a record that cannot be built cannot be logged
            return recorder.refuse_unlogged(pipeline, decision, exc)
        return recorder.log(pipeline, decision, context, started)
