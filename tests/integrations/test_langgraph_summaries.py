"""PruningHook with a summarizer, against the real LangGraph and LangChain, offline: a pass
that evicts writes its summary in place once the session allows it, and a summary that drops
the seed's negation is refused, the history kept whole."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import pytest
from _support.agents import protocol_problems, roles
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10
from prunewarden import Engine
from prunewarden.integrations.langchain import PruningMiddleware
from prunewarden.integrations.langgraph import (
    SUMMARY_NAME,
    TOMBSTONE_NAME,
    PrunedAgentState,
    PruningHook,
)
from prunewarden.scoring import RecencyScorer

UTC = "All timestamps must be UTC; never emit local time."
FAITHFUL = "Timestamps are UTC; never emit local time."
LOSSY = "Timestamps are UTC; emit local time."
EngineFactory = Callable[..., Engine]


def history(pairs: int) -> list[BaseMessage]:
    """The task, the UTC constraint (the oldest message a pass may evict), then question and
    answer pairs of about 35 tokens, without any fact."""
    messages: list[BaseMessage] = [
        HumanMessage("Port the exporter.", id="task"),
        HumanMessage(UTC, id="utc"),
    ]
    for turn in range(pairs):
        messages.append(HumanMessage("question please " + "please " * 25, id=f"q{turn}"))
        messages.append(AIMessage("answer word " + "word " * 25, id=f"a{turn}"))
    return messages


def applied(messages: Sequence[BaseMessage], changes: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with the hook's ``changes`` applied as LangGraph's reducer applies them."""
    merged: Any = add_messages(cast("Any", list(messages)), cast("Any", list(changes)))
    return list(merged)


def summarizer(text: str) -> Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]]:
    """Always ``text``, 20 tokens; records the ids it was given."""

    def summarize(segments: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        summarize.given = [s["id"] for s in segments]  # type: ignore[attr-defined]
        return {"text": text, "tokens": 20}

    return summarize


def hook(engine: Engine, text: str, budget: int = 300) -> PruningHook:
    return PruningHook(
        engine,
        RecencyScorer(),
        budget_tokens=budget,
        session_id="s",
        summarizer=summarizer(text),
        summary_tokens=20,
    )


@pytest.fixture
def checked(engine_with: EngineFactory) -> Engine:
    """Fidelity over every parent: what a pass evicts is checked against its summary."""
    return engine_with(fidelity={"scope": "all"})


class TestHookSummaries:
    def test_an_allowed_summary_is_written_in_place(self, checked: Engine) -> None:
        """The tombstone, then the summary, where the first evicted message was; the rest of
        the history in order, within the budget."""
        messages = history(8)
        pruning = hook(checked, FAITHFUL)
        update = pruning({"messages": messages})
        outcome = pruning.last_outcome
        assert outcome is not None
        assert outcome.summary is not None
        assert outcome.evict[0] == "utc"
        after = applied(messages, update["messages"])
        assert [m.id for m in after[:3]] == ["task", "utc", "summary:utc"]
        assert (after[1].name, after[2].name) == (TOMBSTONE_NAME, SUMMARY_NAME)
        assert after[2].content == FAITHFUL
        kept = [m.id for m in messages if m.id not in outcome.evict]
        assert [m.id for m in after if m.name is None] == kept
        assert not outcome.over_budget

    def test_the_seed_constraint_without_its_negation_is_refused(self, checked: Engine) -> None:
        """A summary dropping 'never': nothing evicted, no message written, negation_lost."""
        pruning = hook(checked, LOSSY)
        update = pruning({"messages": history(8)})
        outcome = pruning.last_outcome
        assert outcome is not None
        assert (outcome.frozen, outcome.evict, outcome.reasons) == (True, (), ("negation_lost",))
        assert "messages" not in update

    def test_a_later_pass_keeps_the_tombstone_in_its_place(self, checked: Engine) -> None:
        """A second pass rewrites the tombstone in place, once, and its summary follows it."""
        pruning = hook(checked, FAITHFUL)
        messages = history(8)
        update = pruning({"messages": messages})
        messages = [*applied(messages, update["messages"]), *history(12)[18:]]
        second = pruning({"messages": messages, "prunewarden": update["prunewarden"]})
        after = applied(messages, second["messages"])
        assert [m.name for m in after].count(TOMBSTONE_NAME) == 1
        assert [(m.id, m.name) for m in after[:2]] == [("task", None), ("utc", TOMBSTONE_NAME)]
        assert after[2].name == SUMMARY_NAME
        assert pruning.last_outcome is not None
        assert after[2].id == f"summary:{pruning.last_outcome.evict[0]}"


class TestSummariesOfSummaries:
    def test_a_later_summary_is_checked_against_the_earlier_one(
        self, engine_with: EngineFactory
    ) -> None:
        """Under the protected scope plain messages are not checked, but the hook's own summary
        is: a later pass folding it into a summary without its negation is refused."""
        engine = engine_with(fidelity={})
        pruning = hook(engine, FAITHFUL)
        messages = history(8)
        update = pruning({"messages": messages})
        assert pruning.last_outcome is not None
        assert pruning.last_outcome.summary is not None
        assert set(update["prunewarden"]["summaries"]) == {"summary:utc"}
        messages = [*applied(messages, update["messages"]), *history(12)[18:]]
        pruning.pruner.summarizer = summarizer(LOSSY)
        refused = pruning({"messages": messages, "prunewarden": update["prunewarden"]})
        assert pruning.last_outcome.reasons == ("negation_lost",)
        assert "messages" not in refused
        assert set(refused["prunewarden"]["summaries"]) == {"summary:utc"}

    def test_a_changed_summary_is_a_message_like_any_other(
        self, engine_with: EngineFactory
    ) -> None:
        """A recorded summary whose text changed is no summary: folding it is not checked."""
        engine = engine_with(fidelity={})
        pruning = hook(engine, FAITHFUL)
        messages = history(8)
        update = pruning({"messages": messages})
        messages = applied(messages, update["messages"])
        messages[2] = AIMessage("Edited.", id="summary:utc", name=SUMMARY_NAME)
        messages = [*messages, *history(12)[18:]]
        pruning.pruner.summarizer = summarizer(LOSSY)
        allowed = pruning({"messages": messages, "prunewarden": update["prunewarden"]})
        assert pruning.last_outcome is not None
        assert "summary:utc" in pruning.last_outcome.evict
        assert pruning.last_outcome.frozen is False
        assert "summaries" in allowed["prunewarden"]


class FakeModel(GenericFakeChatModel):
    """The fake chat model, tools ignored."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeModel:
        del tools, kwargs
        return self


def run_agent(front: str, pruning: PruningHook, turns: int = 10) -> list[BaseMessage]:
    """``turns`` turns of an agent (LangChain's with the middleware, or LangGraph's prebuilt
    one with the pre-model hook) whose first turn states the UTC constraint."""
    answers = (AIMessage("answer word " + "word " * 25, id=f"answer-{n}") for n in range(turns))
    model = FakeModel(messages=answers)
    if front == "langchain":
        graph: Any = create_agent(
            model, [], middleware=[PruningMiddleware(pruning)], checkpointer=InMemorySaver()
        )
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
            graph = create_react_agent(
                model,
                [],
                pre_model_hook=pruning,
                state_schema=PrunedAgentState,
                checkpointer=InMemorySaver(),
            )
    config: Any = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [HumanMessage("Port the exporter.")]}, config)
    graph.invoke({"messages": [HumanMessage(UTC)]}, config)
    for _ in range(turns - 2):
        graph.invoke({"messages": [HumanMessage("question please " + "please " * 25)]}, config)
    return list(graph.get_state(config).values["messages"])


class TestAgents:
    @pytest.mark.parametrize("front", ["langgraph", "langchain"])
    def test_an_agent_writes_the_faithful_summary(self, checked: Engine, front: str) -> None:
        """A real agent's history holds the summary after the tombstone, the task first, and
        stays a valid conversation."""
        messages = run_agent(front, hook(checked, FAITHFUL))
        names = [m.name for m in messages]
        assert SUMMARY_NAME in names
        assert names.index(SUMMARY_NAME) == names.index(TOMBSTONE_NAME) + 1
        assert messages[0].content == "Port the exporter."
        assert UTC not in [m.content for m in messages]
        assert protocol_problems(roles(messages)) == []

    @pytest.mark.parametrize("front", ["langgraph", "langchain"])
    def test_an_agent_keeps_the_constraint_when_the_summary_drops_it(
        self, checked: Engine, front: str
    ) -> None:
        """With the lossy summarizer, the constraint stays in the history and no summary or
        tombstone is written."""
        pruning = hook(checked, LOSSY)
        messages = run_agent(front, pruning)
        assert UTC in [m.content for m in messages]
        assert SUMMARY_NAME not in [m.name for m in messages]
        assert pruning.last_outcome is not None
        assert pruning.last_outcome.reasons == ("negation_lost",)
