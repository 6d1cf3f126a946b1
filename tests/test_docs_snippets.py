"""The code blocks of docs/integrations.md run as written, and the Python client snippet of
docs/server.md shows what it says.

Each Python block runs in a fresh interpreter with the stand-ins the page names for what is the
reader's own (``model``, ``tools``, ``prompt``, ``instructions``: tests/_support/agents.py),
offline. A shell block that cannot run here is marked on the page, on the line before it, with
``_Not run by the tests: REASON._``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support.server import Server

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "integrations.md"
BLOCK = re.compile(
    r"^(?P<before>[^\n]*)\n\n?```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL
)
ILLUSTRATIVE = re.compile(r"^_Not run by the tests: .+\._$")  # as tests/test_docs.py
CODE = {"python", "console", "sh", "shell", "bash"}


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """(language, body, the line before the fence) of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [(m["lang"], m["body"], m["before"]) for m in BLOCK.finditer(text)]


def python_block(needle: str) -> str:
    (found,) = [body for lang, body, _ in blocks(PAGE) if lang == "python" and needle in body]
    return found


def run_python(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter of this environment, with tests/ importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRUNEWARDEN_", "OPENAI_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


class TestIntegrationsPage:
    def test_every_code_block_runs_here_or_says_why_not(self) -> None:
        """Each Python block is one this file runs; each shell block is marked illustrative
        with a reason."""
        unaccounted = []
        for lang, body, before in blocks(PAGE):
            if lang not in CODE:
                continue
            ran = lang == "python" and ("PruningHook(" in body or "PrunedSession(" in body)
            if not ran and not ILLUSTRATIVE.match(before):
                unaccounted.append(body.splitlines()[0])
        assert unaccounted == []
        assert [lang for lang, _, _ in blocks(PAGE) if lang == "python"] == ["python"] * 2

    @pytest.mark.spawns
    def test_the_langchain_snippet_runs_as_written(self) -> None:
        """The LangChain snippet builds an agent that prunes within its budget: three turns
        with a tool call each, nothing printed, nothing frozen."""
        prelude = textwrap.dedent("""
            from _support.agents import chat_model, lookup
            model, tools = chat_model(turns=3), [lookup]
            prompt = "You answer support questions. ALWAYS be polite."
        """)
        driver = textwrap.dedent("""
            from langchain_core.messages import HumanMessage
            config = {"configurable": {"thread_id": "t"}}
            for turn in range(3):
                agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
            outcome = hook.last_outcome
            print(outcome.frozen, outcome.over_budget, outcome.tokens <= 8_000)
        """)
        done = run_python(prelude + python_block("PruningHook(") + driver, ROOT)
        assert (done.returncode, done.stderr, done.stdout) == (0, "", "False False True\n")

    @pytest.mark.spawns
    def test_the_agents_sdk_snippet_runs_as_written(self, tmp_path: Path) -> None:
        """The Agents SDK snippet runs a turn through the wrapped session and prints nothing:
        no "OPENAI_API_KEY is not set", tracing is off."""
        (tmp_path / "examples" / "agents").mkdir(parents=True)
        for policy in (ROOT / "examples" / "agents").glob("*.yaml"):
            shutil.copy(policy, tmp_path / "examples" / "agents" / policy.name)
        prelude = textwrap.dedent("""
            from _support.agents import AnsweringModel
            model, instructions = AnsweringModel(), "Be terse."
        """)
        driver = "\nprint(result.final_output, len(asyncio.run(session.get_items())))\n"
        done = run_python(prelude + python_block("PrunedSession(") + driver, tmp_path)
        assert (done.returncode, done.stderr, done.stdout) == (0, "", "Noted. 2\n")
        assert (tmp_path / "conversations.db").is_file()

    @pytest.mark.spawns
    @pytest.mark.parametrize("script", ["langgraph_agent.py", "openai_agents_session.py"])
    def test_the_examples_of_make_demo_agents_run(self, script: str) -> None:
        """What make demo-agents runs: ten turns within the budget, ending with the tombstone,
        which counts by kind."""
        done = subprocess.run(
            [sys.executable, script],
            cwd=ROOT / "examples" / "agents",
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        lines = done.stdout.splitlines()
        used = [
            tuple(map(int, m.groups())) for m in re.finditer(r"(\d+)/(\d+) tokens", done.stdout)
        ]
        assert len(used) == 10
        assert all(tokens <= budget for tokens, budget in used)
        assert re.fullmatch(
            r"tombstone: \[prunewarden: \d+ earlier messages removed: .*\]", lines[-1]
        )


class TestServerPage:
    @pytest.mark.spawns
    def test_the_python_client_snippet_prints_what_it_says(self, server: Server) -> None:
        """docs/server.md's client snippet, run against a real server at its address: the
        eviction of a tombstoned segment is allowed, as its comment shows."""
        text = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
        (snippet,) = [b for lang, b, _ in blocks(ROOT / "docs" / "server.md") if "Client(" in b]
        shown = re.search(r"# (allow \S.*)$", snippet, re.MULTILINE)
        assert shown is not None
        at_server = snippet.replace("unix:/run/prunewarden/pdp.sock", server.url)
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(at_server, {})  # noqa: S102 - the page's own snippet
        assert output.getvalue() == shown[1] + "\n"
        assert "pip install -e '.[serve]'" in text
