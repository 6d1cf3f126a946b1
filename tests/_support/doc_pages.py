"""The stand-ins the Python blocks of README.md and docs/ run with (tests/test_docs_python.py).

A page's blocks run in order in one namespace, in a temporary folder holding copies of
examples/ and policies/. Before them runs the page's prelude (``PAGES``): it gives the names the
page leaves to the reader (their agent, scores, segments, documents, an audit sink) from the
shipped example inputs, so what a block does with them is the engine's real behaviour. After
them runs the page's epilogue, which prints what the test compares (``PageRun.expected``).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def example(name: str) -> dict[str, Any]:
    """A shipped example input document (examples/inputs/NAME.json of the working folder)."""
    document: dict[str, Any] = json.loads(Path("examples/inputs", f"{name}.json").read_text())
    return document


def window() -> list[dict[str, Any]]:
    """The segments of the shipped example window (examples/windows/free-30k-tokens.json)."""
    text = Path("examples/windows/free-30k-tokens.json").read_text()
    segments: list[dict[str, Any]] = json.loads(text)["segments"]
    return segments


class ScriptedAgent:
    """The README's ``agent``: a harness over the example window for ``passes`` passes, which
    evicts what the plan allows and remembers what it was told."""

    def __init__(self, passes: int = 3) -> None:
        self.window = window()
        self.left = passes
        self.evicted: list[str] = []
        self.tombstones: list[str] = []
        self.rescored: list[str] = []

    def running(self) -> bool:
        """True for the scripted number of passes."""
        self.left -= 1
        return self.left >= 0

    def score_window(self) -> list[dict[str, Any]]:
        """The segments still in the window, with their scores."""
        return [dict(segment) for segment in self.window]

    def mean_relevance(self) -> float:
        """The mean score of the window."""
        return float(sum(s["score"] for s in self.window)) / len(self.window)

    def tokens(self) -> int:
        """The tokens of the window."""
        return sum(int(s["tokens"]) for s in self.window)

    def tokens_over_budget(self) -> int:
        """What a budget of 4,000 tokens asks to free."""
        return max(self.tokens() - 4000, 0)

    def rescore(self, ids: tuple[str, ...]) -> None:
        """Remembers what to score again."""
        self.rescored.extend(ids)

    def write_tombstones(self, ids: tuple[str, ...]) -> None:
        """Remembers the tombstones written."""
        self.tombstones.extend(ids)

    def evict(self, ids: tuple[str, ...]) -> None:
        """Drops the segments from the window."""
        self.evicted.extend(ids)
        self.window = [s for s in self.window if s["id"] not in ids]


class Counter:
    """A reader's metrics object with a ``count`` method (docs/sessions.md)."""

    def __init__(self) -> None:
        self.counted: list[str] = []

    def count(self, decision: Any) -> None:
        """Remembers the decision's check."""
        self.counted.append(decision.check)


def to_segments(messages: list[Any]) -> list[dict[str, Any]]:
    """The reader's mapping of LangChain messages to segments (docs/transitions.md): the
    system prompt and the first human message (the task) non-recoverable, a tool call and
    its answers one group."""
    segments = []
    task_seen = False
    for message in messages:
        segment: dict[str, Any] = {"id": message.id, "kind": message.type, "text": message.text}
        if message.type == "system" or (message.type == "human" and not task_seen):
            segment["non_recoverable"] = True
            task_seen = task_seen or message.type == "human"
        calls = getattr(message, "tool_calls", None) or ()
        if calls:
            segment["group"] = calls[0]["id"]
        if message.type == "tool":
            segment["group"] = message.tool_call_id
        segments.append(segment)
    return segments


@dataclass(frozen=True)
class PageRun:
    """How a page's blocks run: the stand-ins before them, the checks after, what they print.

    ``between`` maps the index of a block (among those that run) to what runs just before it:
    the checks of the blocks before, where the page then turns to another program of the
    reader's, and that program's stand-ins.
    """

    prelude: str
    epilogue: str
    expected: str
    environment: dict[str, str] = field(default_factory=dict)
    between: dict[int, str] = field(default_factory=dict)


def _source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# The reader's segment, scores, spans, window and documents: the shipped example inputs.
_INPUTS = _source("""
    from _support.doc_pages import example, window as _window
    _eviction = example("eviction-healthy")
    segment, score = _eviction["segment"], _eviction["score"]
    perturbed = perturbed_score = _eviction["perturbed_score"]
    candidates = eviction_candidates = _eviction["eviction_candidates"]
    scores, pinned = example("collapse-healthy")["history"][-1]["scores"], ["task"]
    spans = example("staleness-healthy")["spans"]
    window = segments = _window()
    document = example("eviction-healthy")
""")

# A fixed port would collide with a parallel run: the page's 9464 becomes a free one.
_METRICS_ON_A_FREE_PORT = _source("""
    import prometheus_client
    _start_http_server, _served = prometheus_client.start_http_server, []
    def _on_a_free_port(port, addr, registry):
        _served.append(_start_http_server(0, addr=addr, registry=registry)[0])
    prometheus_client.start_http_server = _on_a_free_port
""")

PAGES: dict[str, PageRun] = {
    "README.md": PageRun(
        prelude=_source("""
            from _support.doc_pages import ScriptedAgent
            agent = ScriptedAgent(passes=3)
        """),
        # Every eviction tombstoned first, nothing to rescore, the window within its budget.
        epilogue=_source("""
            import json
            kinds = {json.loads(line)["kind"] for line in open("audit.jsonl")}
            print(len(agent.evicted), agent.evicted == agent.tombstones, agent.rescored,
                  agent.tokens() <= 4000, sorted(kinds))
        """),
        # The first decision's line (what its comment shows), then the loop's checks.
        expected=(
            "deny ('pinned', 'no_tombstone')\n"
            "27 True [] True ['decision', 'pass', 'policy_activated']\n"
        ),
    ),
    "docs/audit-log.md": PageRun(
        prelude=_INPUTS,
        epilogue=_source("""
            import json
            for line in open("audit.jsonl"):
                record = json.loads(line)
                print(record["kind"], record.get("session_id"), record.get("labels"))
        """),
        expected="policy_activated None None\ndecision run-7 {'team': 'search'}\n",
    ),
    "docs/deployments.md": PageRun(
        prelude=_INPUTS + "from prunewarden import AuditLog\naudit = AuditLog('shadow.jsonl')\n",
        # The candidate (1.5.0) decides beside the active policy without enforcing.
        epilogue=_source("""
            shadowed = engine.evaluate(document)
            print(decision.outcome, session.session_id, shadowed.outcome,
                  shadowed.shadow.policy.version, shadowed.shadow.outcome)
        """),
        expected="allow run-7 allow 1.5.0 deny\n",
    ),
    "docs/fleet.md": PageRun(
        prelude="",
        # The shipped prod-eu policy (locked), bundled and signed; the engine runs it from the
        # bundle file and names the revision.
        epilogue=_source("""
            from pathlib import Path
            from prunewarden.bundle import build_bundle, generate_key_pair, sign_bundle
            keys = generate_key_pair()
            Path("signer.pub.pem").write_bytes(keys.public_pem)
            built = build_bundle(["examples/deployments/prod-eu.yaml"], revision="r1")
            Path("bundle.tar.gz").write_bytes(sign_bundle(built, keys.private_pem))
            with fleet_engine("bundle.tar.gz", Path("signer.pub.pem")) as engine:
                identity = engine.policy.identity
                print(identity.name, identity.bundle_revision, engine.bundle)
        """),
        expected="prod-eu r1 bundle.tar.gz\n",
    ),
    "docs/mcp.md": PageRun(
        prelude=_source("""
            from _support.doc_pages import example
            before = example("transition-trim-dropped-task")["before"]
            after = example("transition-trim-dropped-task")["after"]
        """),
        # Refused and repaired as the page says, and the decision is the one the log holds.
        epilogue=_source("""
            import json
            logged = [json.loads(line)["decision_id"] for line in open("audit.jsonl")
                      if json.loads(line)["kind"] == "decision"]
            print(decision["outcome"], decision["actions"][0], logged == [decision["decision_id"]])
        """),
        expected="deny {'action': 'restore', 'ids': ['m1', 'm2']} True\n",
    ),
    "docs/explain.md": PageRun(
        prelude="",
        epilogue="print(decision.outcome, decision.explanation)\n",
        expected="deny {'mode': 'enforce', 'rules': [], 'rule_backend': None}\n",
    ),
    "docs/observability.md": PageRun(
        prelude=_INPUTS
        + _METRICS_ON_A_FREE_PORT
        + _source("""
            import queue as _queue
            from prunewarden import load_policy
            queue, policy = _queue.Queue(), load_policy("examples/deployments/prod-eu.yaml")
        """),
        # The scrape shows the pass's totals; the Forwarder puts one id per decision.
        epilogue=_source("""
            import urllib.request
            from prunewarden import Engine
            _url = f"http://127.0.0.1:{_served[0].server_address[1]}/metrics"
            _text = urllib.request.urlopen(_url).read().decode()
            print([line for line in _text.splitlines() if line.startswith("prunewarden_pass")])
            Engine(policy, on_decision=Forwarder()).evaluate(document)
            print(len(queue.get_nowait()), status.healthy)
        """),
        expected=(
            "['prunewarden_pass_evicted_segments_total 2.0',"
            " 'prunewarden_pass_freed_tokens_total 3450.0']\n1 True\n"
        ),
    ),
    "docs/replay.md": PageRun(
        prelude=_INPUTS
        + _source("""
            from pathlib import Path
            from prunewarden import Engine
            Path("traces").mkdir()
            session_id, labels, cycle = "run-7", {"team": "search"}, 1
            session = Engine.default().session(session_id, labels=labels)
        """),
        # The trace written is one replay reads to the end.
        epilogue=_source("""
            from prunewarden.replay import replay_trace
            replayed = replay_trace(Engine.default(), "traces/run-7.jsonl")
            print(replayed.complete, replayed.events, replayed.session_id, replayed.labels)
        """),
        expected="True 1 run-7 {'team': 'search'}\n",
    ),
    "docs/sessions.md": PageRun(
        prelude=_INPUTS
        + _source("""
            from prunewarden import AuditLog
            from _support.doc_pages import Counter
            audit, checkpoint, metrics = AuditLog("audit.jsonl"), {}, Counter()
            history = example("collapse-healthy")["history"]
            evictions = [{k: _eviction[k] for k in ("segment", "score", "perturbed_score")}]
            _staleness = example("staleness-healthy")
            keep_top_k, turns = _staleness["keep_top_k"], _staleness["turns"]
            path = "sealed.db"
        """),
        epilogue=_source("""
            from pathlib import Path
            engine.evaluate(document)
            print(metrics.counted, Path("sessions.db").is_file(), Path("sealed.db").is_file())
        """),
        expected="['eviction'] True True\n",
        environment={"PRUNEWARDEN_SESSION_KEY": "k" * 32},
    ),
    "docs/memory.md": PageRun(
        # The reader's client: a real Anthropic client answered by a scripted model that writes
        # a pinned rule, deletes it (refused), writes its tombstone and deletes it again.
        prelude=_source("""
            from _support.memory_loop import scripted_client
            rule = "/memories/core/rules.md"
            client, _ = scripted_client([
                {"command": "create", "path": rule, "file_text": "No red-eye flights."},
                {"command": "delete", "path": rule},
                {"command": "create", "path": "/memories/tombstones/rules.md",
                 "file_text": f"---\\ntombstone_for: [{rule}]\\n---\\nLifted.\\n"},
                {"command": "delete", "path": rule},
            ])
            model = "claude-scripted"
        """),
        epilogue=_source("""
            print([edit.outcome for edit in state.edits], reply.stop_reason, state.found,
                  [edit.command for edit in state.after])
        """),
        expected="['allow', 'deny', 'allow', 'allow'] end_turn True ['delete']\n",
    ),
    "docs/testing-policies.md": PageRun(
        prelude="",
        epilogue="print(report.passed, sorted({r.status for r in result.results}))\n",
        expected="True ['passed']\n",
    ),
    "docs/transitions.md": PageRun(
        # The reader's history: the recorded conversations of examples/agents, over 2,000
        # tokens; a harness that writes no tombstones.
        prelude=_source("""
            import sys
            sys.path.insert(0, "examples/agents")
            from conversations import CONVERSATIONS
            from guarded_trim import history
            from prunewarden import Engine, parse_policy
            from _support.doc_pages import example, to_segments
            before = example("transition-trim-dropped-task")["before"]
            after = example("transition-trim-dropped-task")["after"]
            messages = history([line for lines in CONVERSATIONS.values() for line in lines])
            POLICY = ("apiVersion: prunewarden/v1\\nkind: Policy\\n"
                      "metadata: {name: guarded-trim, version: 1.0.0}\\n"
                      "spec: {transition: {require_tombstones: false}}\\n")
            session = Engine(parse_policy(POLICY, "guarded-trim")).session("guarded-trim")
        """),
        between={
            # The trim drops the task: refused; the repaired trim starts with the prompt and
            # task. Then the reader's Anthropic program: its history and client.
            4: _source("""
                print(decision.outcome, decision.codes, [m.id for m in trimmed][:3],
                      [m.id for m in messages][:3])
                from anthropic_context_editing import history as anthropic_history
                from _support.anthropic_client import RecordedAnthropic
                messages = anthropic_history(CONVERSATIONS["ferry-trip"])
                model, system = "claude-sonnet-4-5", "You are a careful research assistant."
                client = RecordedAnthropic(cleared_tool_uses=5)
            """),
        },
        # The edits the compiled parameters allowed: five tool results cleared, none refused.
        epilogue=_source("""
            (sent,) = client.beta.messages.requests
            print(outcome.decision.outcome, len(outcome.window.cleared), sent["betas"],
                  sent["context_management"] == request["context_management"])
        """),
        expected=(
            "deny ('pinned_removed',) ['m00', 'm01', 'm38'] "
            "['m00', 'm01', 'prunewarden-tombstone-90c83657b9dc']\n"
            "allow 5 ['context-management-2025-06-27'] True\n"
        ),
    ),
    # The page's blocks need nothing of the reader's: they assert what they show.
    "docs/fidelity.md": PageRun(
        prelude="",
        epilogue="print(result.kept_share, outcome.plan is not None)\n",
        expected="0.5 True\n",
    ),
}
