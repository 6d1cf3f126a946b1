"""LangChain 1.x: the LangGraph adapter's pass as an ``AgentMiddleware.before_model``.

Needs ``prunewarden[langgraph]`` (with ``langchain`` 1.x). ``create_agent(model, tools,
middleware=[PruningMiddleware(hook)])``: before every model call the history is pruned as
:class:`~prunewarden.integrations.langgraph.PruningHook` prunes it, and the session's state is
kept in the agent's state (``prunewarden``), persisted by the agent's checkpointer.

The agent's system prompt is never in its state, so no pass can remove it; the hook counts it in
the budget when given as ``PruningHook(system_prompt=...)``. The middleware also sees each model
request: a system prompt the hook does not count is taken on for the next passes, with a
warning, since the call it was found on may have read more than the budget.

:class:`GuardedSummarizationMiddleware` is LangChain's ``SummarizationMiddleware`` with every
summary judged before it replaces anything: the messages it would fold and the summary become a
transition (``Session.verify``), the summary deriving from what it folds, so that the policy's
fidelity check (``spec.fidelity``, docs/fidelity.md) reads the summary against its protected
parents. A refused summary that putting messages back repairs (a lost fact or negation, a
pinned message folded) is written with only those put back verbatim; any other refusal changes
nothing, the originals stay in the state. The decision is recorded by the session and kept in
``last_decision``; a warning on the ``prunewarden.integrations`` logger names what was put back
(or kept) and the decision id.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, NotRequired

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    SummarizationMiddleware,
)
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from prunewarden.decision import Decision
from prunewarden.integrations._tombstones import warn_restored
from prunewarden.integrations.langgraph import (
    STATE_KEY,
    Classifier,
    Pin,
    PruningHook,
    message_segments,
    message_text,
    policy_classifier,
)
from prunewarden.scoring import text_sha256
from prunewarden.session import Session

_log = logging.getLogger("prunewarden.integrations")

#: The refusals a summary survives once the messages named by ``restore`` are put back beside it:
#: what it may not fold, and the parents whose facts or negations it lost.
_REPAIRABLE = frozenset(
    {"pinned_removed", "group_split", "no_tombstone", "fact_lost", "negation_lost"}
)


class PrunedState(AgentState[Any]):
    """The agent's state with the session's state."""

    prunewarden: NotRequired[dict[str, Any]]


class PruningMiddleware(AgentMiddleware[PrunedState, Any]):
    """Runs ``hook`` before each model call."""

    state_schema = PrunedState

    def __init__(self, hook: PruningHook) -> None:
        super().__init__()
        if hook.state_key != STATE_KEY:
            message = f"the middleware keeps the session under {STATE_KEY!r}"
            raise ValueError(message)
        self.hook = hook

    def before_model(self, state: PrunedState, runtime: Any) -> dict[str, Any] | None:
        """The removals and the tombstone, and the session's new state."""
        del runtime
        return self.hook(state)

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[..., Any]) -> Any:
        """The call as it was, once the hook counts the request's system prompt."""
        self._count_prompt(request)
        return handler(request)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        """As :meth:`wrap_model_call`, for an agent run with ``ainvoke``."""
        self._count_prompt(request)
        return await handler(request)

    def _count_prompt(self, request: ModelRequest[Any]) -> None:
        prompt = request.system_prompt
        if prompt is None or prompt == self.hook.system_prompt:
            return
        _log.warning(
            "session %s: the agent's system prompt is not the one PruningHook(system_prompt=...) "
            "counts; it is counted from the next pass on (this call may exceed the budget)",
            self.hook.session_id,
        )
        self.hook.system_prompt = str(prompt)


class GuardedSummarizationMiddleware(SummarizationMiddleware[Any, Any]):
    """``SummarizationMiddleware`` whose summaries ``session`` judges first (see the module).

    ``model`` and ``options`` are the middleware's own (``trigger``, ``keep``, ``summarizer``,
    ...). Messages map to segments as the LangGraph adapter maps them (``classify``, ``pin``:
    the task and pinned messages are protected). The agent's checkpointer keeps every earlier
    state, so a folded message stays recoverable: the summary is recorded as its tombstone
    (``tombstone_folded``); with ``False``, a summary that folds a pinned message is refused.
    """

    def __init__(  # noqa: PLR0913 - the session's options, then the middleware's own
        self,
        model: Any,
        *,
        session: Session,
        applied_by: str = "langchain.agents.middleware.SummarizationMiddleware",
        classify: Classifier | None = None,
        pin: Pin | None = None,
        tombstone_folded: bool = True,
        **options: Any,
    ) -> None:
        super().__init__(model, **options)
        self.session = session
        self.applied_by = applied_by
        self.classify = classify
        self.pin = pin
        self.tombstone_folded = tombstone_folded
        self.last_decision: Decision | None = None

    def before_model(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        """The summarization, if the session allows it; else nothing changes."""
        return self._judged(state["messages"], super().before_model(state, runtime))

    async def abefore_model(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        """As :meth:`before_model`, for an agent run with ``ainvoke``."""
        return self._judged(state["messages"], await super().abefore_model(state, runtime))

    def _judged(
        self, messages: list[AnyMessage], update: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        if update is None:
            return None
        # The update is [RemoveMessage(all), summary, *preserved]: the summary folds the rest.
        summary, *preserved = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
        kept = {m.id for m in preserved}
        folded = [str(m.id) for m in messages if m.id not in kept]
        if summary.id is None:
            summary.id = f"summary-of-{folded[0]}-and-{len(folded) - 1}-more"
        classify = self.classify or policy_classifier(self.session.policy)
        before = message_segments(messages, classify=classify, pin=self.pin)
        by_id = {segment["id"]: segment for segment in before}
        decision = self.session.verify(
            before,
            [self._summary_segment(summary, folded), *(by_id[str(m.id)] for m in preserved)],
            tombstones=folded if self.tombstone_folded else (),
            applied_by=self.applied_by,
        )
        self.last_decision = decision
        if not decision.blocks:
            return update
        if decision.restore and _REPAIRABLE.issuperset(decision.codes):
            # The summary stands; only what it must not replace (a pinned message it could
            # not fold, a parent whose facts it lost) is put back verbatim, in its place.
            after = [self._summary_segment(summary, folded), *(by_id[str(m.id)] for m in preserved)]
            originals = {str(m.id): m for m in messages}
            window = decision.repair(before, after)
            written = {str(summary.id): summary, **{str(m.id): m for m in preserved}}
            restored = [written.get(s["id"]) or originals[s["id"]] for s in window]
            warn_restored(self.session, f"summary {summary.id}", decision, decision.restore)
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *restored]}
        _log.warning(
            "session %s: summary %s refused (%s); the %d messages it would replace are kept "
            "(decision %s)",
            self.session.session_id,
            summary.id,
            ", ".join(decision.codes),
            len(folded),
            decision.decision_id,
        )
        return None

    def _summary_segment(self, summary: BaseMessage, folded: list[str]) -> dict[str, Any]:
        """The summary as a segment deriving from what it folds; its text is what the
        summarizer wrote, without the header the middleware puts before it (so that an error
        or a refusal as the summary is seen as one)."""
        header = message_text(self._build_new_messages("")[0])
        text = message_text(summary).removeprefix(header)
        return {
            "id": str(summary.id),
            "kind": "summary",
            "text": text,
            "tokens": count_tokens_approximately([summary]),
            "text_sha256": text_sha256(text),
            "derived_from": folded,
        }


__all__ = ["GuardedSummarizationMiddleware", "PrunedState", "PruningMiddleware"]
