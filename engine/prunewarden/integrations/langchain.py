"""LangChain 1.x: the LangGraph adapter's pass as an ``AgentMiddleware.before_model``.

Needs ``prunewarden[langgraph]`` (with ``langchain`` 1.x). ``create_agent(model, tools,
middleware=[PruningMiddleware(hook)])``: before every model call the history is pruned as
:class:`~prunewarden.integrations.langgraph.PruningHook` prunes it, and the session's state is
kept in the agent's state (``prunewarden``), persisted by the agent's checkpointer.
"""

from __future__ import annotations

from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState

from prunewarden.integrations.langgraph import STATE_KEY, PruningHook


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


__all__ = ["PrunedState", "PruningMiddleware"]
