"""LangChain's SummarizationMiddleware guarded: a summary that loses what a protected message
said is refused and what it lost is put back beside it; a faithful one replaces them (real
langchain, offline)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
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
FAITHFUL = (
    "The task: fix the CSV exporter in src/report/export.py. Timestamps are UTC; local time is "
    "never emitted. The exporter calls datetime.now() on line 88."
)
LOSSY = (
    "The task: fix the CSV exporter in src/report/export.py. Timestamps are UTC; emit local "
    "time. The exporter calls datetime.now() on line 88."
)
REFUSAL = "I'm sorry, but I can't help with that."
POLICY = """
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: guarded-summaries, version: 1.0.0}
spec:
  fidelity: {mode: enforce}
"""


class ScriptedModel(GenericFakeChatModel):
    """The fake chat model; tools change nothing, the replies are scripted."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        del tools, kwargs
        return self


def replies() -> Iterator[AIMessage]:
    turn = 0
    while True:
        turn += 1
        yield AIMessage(f"Step {turn}: the exporter calls datetime.now() on line 88.")


class Agent:
    """A LangChain agent whose history is summarized past 6 messages, keeping the last 2."""

    def __init__(self, summary: str) -> None:
        self.session = Engine(parse_policy(POLICY, "guarded-summaries")).session("agent-1")
        model = ScriptedModel(messages=replies())
        self.middleware = GuardedSummarizationMiddleware(
            model,
            session=self.session,
            trigger=("messages", 6),
            keep=("messages", 2),
            summarizer=self.summarizer(summary),
        )
        self.graph: Any = create_agent(
            model, [], middleware=[self.middleware], checkpointer=InMemorySaver()
        )
        self.config: Any = {"configurable": {"thread_id": "thread-1"}}
        self.summarized: list[list[str]] = []

    def summarizer(self, summary: str) -> Callable[[Sequence[BaseMessage]], str]:
        def summarize(messages: Sequence[BaseMessage]) -> str:
            self.summarized.append([str(m.id) for m in messages])
            return summary

        return summarize

    def run(self) -> list[BaseMessage]:
        """The task, then questions until the history passes the trigger."""
        for text in [TASK, "Where is the time read?", "And what next?", "Go on."]:
            out = self.graph.invoke({"messages": [HumanMessage(text)]}, self.config)
        return list(out["messages"])

    async def arun(self) -> list[BaseMessage]:
        """As :meth:`run`, with ``ainvoke``."""
        for text in [TASK, "Where is the time read?", "And what next?", "Go on."]:
            out = await self.graph.ainvoke({"messages": [HumanMessage(text)]}, self.config)
        return list(out["messages"])


class TestGuardedSummaries:
    def test_a_faithful_summary_replaces_what_it_folds(self) -> None:
        """A summary keeping the task's facts and its negation is allowed: the history is the
        summary and the kept messages."""
        agent = Agent(FAITHFUL)
        messages = agent.run()
        decision = agent.middleware.last_decision
        assert decision is not None
        assert decision.outcome == "allow"
        assert agent.summarized
        assert "summarization" in messages[0].additional_kwargs.get("lc_source", "")
        assert TASK not in [m.content for m in messages]

    def test_the_seed_constraint_without_its_negation_is_refused(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """'never emit local time' summarized as 'emit local time': negation_lost, naming the
        task message and the summary; the summary is written with only the task put back
        verbatim, and a warning names it and the decision."""
        agent = Agent(LOSSY)
        with caplog.at_level(logging.WARNING, logger="prunewarden.integrations"):
            messages = agent.run()
        decision = agent.middleware.last_decision
        assert decision is not None
        assert decision.blocks
        assert "negation_lost" in decision.codes
        reason = next(r for r in decision.reasons if r.code == "negation_lost")
        task = next(m for m in messages if m.content == TASK)
        assert reason.detail["parent"] == str(task.id)
        assert reason.detail["child"].startswith("summary-of-")
        assert reason.detail["lost"] == ["negation"]
        # The summary stands; the task it lost the negation of is put back verbatim first.
        assert messages[0].content == TASK
        assert messages[1].additional_kwargs.get("lc_source") == "summarization"
        assert len(messages) == 5
        (warning,) = caplog.records
        assert warning.getMessage().endswith(
            f"refused (negation_lost); put back {task.id} (decision {decision.decision_id})"
        )

    def test_an_agent_run_with_ainvoke_is_guarded_too(self) -> None:
        """Through abefore_model: the lost negation is refused and the task put back."""
        agent = Agent(LOSSY)
        messages = asyncio.run(agent.arun())
        decision = agent.middleware.last_decision
        assert decision is not None
        assert decision.codes == ("negation_lost",)
        assert [m.content for m in messages].count(TASK) == 1
        assert len(messages) == 5

    @pytest.mark.parametrize("summary", [REFUSAL, "   "], ids=["refusal", "blank"])
    def test_a_refusal_or_nothing_is_not_a_summary(self, summary: str) -> None:
        """A refusal or a blank text as the summary: summary_is_error, the originals kept."""
        agent = Agent(summary)
        messages = agent.run()
        decision = agent.middleware.last_decision
        assert decision is not None
        assert "summary_is_error" in decision.codes
        assert len(messages) == 8


class TestExample:
    def test_the_demo_refuses_the_lost_negation_and_allows_the_faithful_summary(self) -> None:
        """examples/agents/guarded_summary.py (make demo-agents): the summary without the UTC
        constraint's negation is refused naming the task, the history stays whole; the faithful
        one is allowed and replaces what it folds."""
        script = Path(__file__).resolve().parents[2] / "examples" / "agents" / "guarded_summary.py"
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=120
        )
        lines = done.stdout.splitlines()
        assert lines[0] == "lossy summary: deny (negation_lost)"
        assert lines[2] == (
            "    detail: {'parent': 'task', 'child': 'summary-of-task-and-4-more', "
            "'lost': ['negation']}"
        )
        assert lines[3] == "  put back verbatim: task"
        assert lines[4] == "  history: 5 messages, summarized"
        assert lines[5] == "faithful summary: allow (transition_clean)"
        assert lines[-1] == "  history: 4 messages, summarized"
        assert done.stderr == ""
