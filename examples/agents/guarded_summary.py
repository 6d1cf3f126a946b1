"""LangChain's SummarizationMiddleware, guarded: a summary that drops the task's negation is
refused, and it is written with the task put back verbatim beside it (only what it lost comes
back); a faithful one replaces what it folds. Offline: a scripted
chat model answers, and a scripted summarizer writes the summaries (the seed's failure: "never
emit local time" paraphrased until the negation is gone). Run it with ``make demo-agents``
(needs ``prunewarden[langgraph]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from prunewarden import Engine, parse_policy
from prunewarden.integrations.langchain import GuardedSummarizationMiddleware

TASK = (
    "Fix the CSV exporter in src/report/export.py. All timestamps must be UTC; "
    "never emit local time."
)
QUESTIONS = ["Where is the time read?", "What does the test expect?", "Go on."]
SUMMARIES = {
    "lossy": "Fix the CSV exporter in src/report/export.py; timestamps are UTC, emit local time. "
    "The exporter calls datetime.now() on line 88.",
    "faithful": "Fix the CSV exporter in src/report/export.py. Timestamps are UTC; local time "
    "is never emitted. The exporter calls datetime.now() on line 88.",
}
# Only the fidelity section is new: every summary of the task is checked, by its facts.
POLICY = """
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: guarded-summaries, version: 1.0.0}
spec:
  fidelity: {mode: enforce}
"""


class ScriptedModel(GenericFakeChatModel):
    """A chat model that answers from a script; tools change nothing."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        del tools, kwargs
        return self


def answers() -> Iterator[AIMessage]:
    while True:
        yield AIMessage("The exporter calls datetime.now() on line 88.")


def run(kind: str) -> None:
    session = Engine(parse_policy(POLICY, "guarded-summaries")).session(f"exporter-{kind}")
    model = ScriptedModel(messages=answers())

    def summarize(messages: Sequence[BaseMessage]) -> str:
        del messages
        return SUMMARIES[kind]

    guard = GuardedSummarizationMiddleware(
        model, session=session, trigger=("messages", 6), keep=("messages", 2), summarizer=summarize
    )
    agent: Any = create_agent(model, [], middleware=[guard], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": kind}}
    for n, text in enumerate([TASK, *QUESTIONS]):
        message = HumanMessage(text, id="task" if n == 0 else f"question-{n}")
        state = agent.invoke({"messages": [message]}, config)
    decision = guard.last_decision
    if decision is None:
        raise SystemExit(f"{kind}: the history never reached the summarization trigger")
    print(f"{kind} summary: {decision.outcome} ({', '.join(decision.codes) or 'no reasons'})")
    for reason in decision.reasons:
        print(f"  {reason.code}: {reason.message}")
        print(f"    detail: {reason.detail}")
    if decision.restore:
        print(f"  put back verbatim: {', '.join(decision.restore)}")
    messages = state["messages"]
    summarized = any(m.additional_kwargs.get("lc_source") == "summarization" for m in messages)
    print(f"  history: {len(messages)} messages, {'summarized' if summarized else 'whole'}")


def main() -> None:
    for kind in SUMMARIES:
        run(kind)


if __name__ == "__main__":
    main()
