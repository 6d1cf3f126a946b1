"""LangChain 1.x: the LangGraph adapter's pass as an ``AgentMiddleware.before_model``.

Needs ``prunewarden[langgraph]`` (with ``langchain`` 1.x). ``create_agent(model, tools,
middleware=[PruningMiddleware(hook)])``: before every model call the history is pruned as
:class:`~prunewarden.integrations.langgraph.PruningHook` prunes it, and the session's state is
kept in the agent's state (``prunewarden``), persisted by the agent's checkpointer.

The agent's system prompt is never in its state, so no pass can remove it; the hook counts it in
the budget when given as ``PruningHook(system_prompt=...)``. The middleware also sees each model
request: a system prompt the hook does not count is taken on for the next passes, with a
warning, since the call it was found on may have read more than the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest

from prunewarden.integrations.langgraph import STATE_KEY, PruningHook

_log = logging.getLogger("prunewarden.integrations")


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


__all__ = ["PrunedState", "PruningMiddleware"]
