"""The outputs shown in README.md and docs/ are what the commands print today.

Each run happens in a temporary copy of the example files, with the prunewarden of this
environment first on PATH. Only what differs from run to run is masked, on both sides: decision
ids, times, the audit chain's head hash and durations. Policy digests and file hashes are kept,
so a changed example policy shows up as a changed page. In an expected block, a line that is only
``...`` stands for any number of lines.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prunewarden.cli._common import EXIT_CODE_MEANINGS, exit_codes_table
from prunewarden.cli._main import COMMANDS, _parser
from prunewarden.errors import ExitCode

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # .venv/bin under make test: it holds the prunewarden script
COPIED = ("examples", "policies", "schemas")

# (page, first command of a transcript block: the line after "$ ", as written on the page).
TRANSCRIPTS = [
    ("README.md", "prunewarden validate examples/policies/long-horizon.yaml"),
    ("docs/explain.md", "prunewarden explain --format text --audit-log audit.jsonl"),
    ("docs/guards.md", "prunewarden evaluate --audit-log audit.jsonl examples/inputs/"),
    ("docs/guards.md", "prunewarden evaluate --format text --audit-log audit.jsonl"),
    ("docs/sessions.md", "prunewarden plan --format text"),
    ("docs/transitions.md", "prunewarden evaluate --format text --audit-log audit.jsonl"),
    ("docs/deployments.md", "prunewarden policy show examples/deployments/prod-eu.yaml"),
    ("docs/deployments.md", "prunewarden policy show --format json"),
    ("docs/deployments.md", "prunewarden validate examples/deployments/replay.yaml"),
    ("docs/deployments.md", "sed -i 's/consecutive_cycles: 3/consecutive_cycles: 4/' "),
    ("docs/deployments.md", "sed -i 's/consecutive_cycles: 3/consecutive_cycles: 4/; "),
    ("docs/deployments.md", "prunewarden policy diff examples/deployments/prod-eu.yaml"),
    ("docs/deployments.md", "prunewarden evaluate --format text --policy examples/deployments/"),
    ("docs/replay.md", "prunewarden replay examples/traces/collapse-narrowing.jsonl"),
    ("docs/replay.md", "prunewarden diff --base policies/default.yaml"),
    ("docs/testing-policies.md", "sed -i 's/spread_floor: 0.08/spread_floor: 0.06/; "),
    ("docs/testing-policies.md", "prunewarden test policies/tests"),
    ("docs/deployments.md", "grep -c '\"agrees\":false' audit.jsonl"),
    ("docs/observability.md", "prunewarden evaluate --policy examples/deployments/prod-eu.yaml "),
    ("docs/calibration.md", "prunewarden calibrate --healthy examples/traces/healthy-*.jsonl"),
    ("docs/scale.md", "for input in examples/inputs/*.json; do prunewarden evaluate"),
    ("docs/ci.md", "prunewarden schema --catalog"),
    ("docs/policy-check.md", "prunewarden policy check --against policies/default.yaml"),
    ("docs/policy-check.md", "prunewarden policy check --witnesses witnesses"),
    ("docs/rules.md", "prunewarden policy show examples/policies/content-pins.yaml"),
    ("docs/compaction.md", "prunewarden classify examples/classify/window.json"),
    (
        "docs/compaction.md",
        (
            "prunewarden hook claude-code --preview examples/compaction/session.jsonl"
            " --policy examples/compaction/fidelity.yaml"
        ),
    ),
    ("docs/server.md", "prunewarden serve --print-config --config examples/server/serve.yaml"),
    ("docs/server.md", "sed 's/maxConnections: 256/maxConnections: 0/; "),
]

# What a transcript's page did before it, run first and not shown: (page, command) -> script.
SETUP = {
    ("docs/deployments.md", "grep -c '\"agrees\":false' audit.jsonl"): (
        "prunewarden evaluate --policy examples/deployments/prod-eu.yaml"
        " --shadow examples/deployments/prod-eu-candidate.yaml"
        " --audit-log audit.jsonl examples/inputs/eviction-healthy.json > /dev/null"
    ),
}

MASKS = [
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "<time>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<decision-id>"),
    (re.compile(r"head sha256:[0-9a-f]{64}"), "head sha256:<chain-head>"),
    (re.compile(r"\bat sha256:[0-9a-f]{12}\b"), "at sha256:<chain-head>"),  # doctor's checkpoint
    (re.compile(r"\bin \d+(?:\.\d+)?s\b"), "in <duration>"),
]

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)
PYTHON = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(page: str) -> list[str]:
    return FENCE.findall((ROOT / page).read_text(encoding="utf-8"))


def mask(text: str, workdir: Path) -> str:
    text = text.replace(str(workdir), "<workdir>")
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is ``expected``, a line of ``...`` standing for any lines."""
    parts = [
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(line) + r"\n"
        for line in expected.splitlines()
    ]
    return re.fullmatch("".join(parts), actual) is not None


def run_shell(script: str, workdir: Path) -> str:
    """Run ``script`` with sh in ``workdir``; standard output and error together, as shown."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRUNEWARDEN_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"  # the two streams interleave as on a terminal
    result = subprocess.run(
        ["sh", "-c", script],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    return result.stdout


def transcript_script(block: str) -> str:
    """A shell script that prints each ``$`` command of ``block`` (with its continuation lines)
    and runs it, keeping ``$?`` for the next command as a terminal would."""
    commands: list[list[str]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append([line])
        elif commands and commands[-1][-1].endswith("\\"):
            commands[-1].append(line)
    script = ["status=0"]
    for lines in commands:
        script += [f"printf '%s\\n' {shlex.quote(line)}" for line in lines]
        script += ["(exit $status); " + "\n".join(lines).removeprefix("$ "), "status=$?"]
    return "\n".join(script) + "\n"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    # Links are copied as links: the Node example's package is a link into clients/, which the
    # copy reaches through a link to this checkout's (built, with its node_modules).
    for name in COPIED:
        shutil.copytree(ROOT / name, tmp_path / name, symlinks=True)
    (tmp_path / "clients").symlink_to(ROOT / "clients")
    return tmp_path


@pytest.mark.spawns
def test_demo_page_shows_what_the_demo_prints(workdir: Path) -> None:
    """docs/demo.md shows what examples/demo.sh prints, as make demo runs it."""
    (expected,) = blocks("docs/demo.md")
    actual = run_shell("sh examples/demo.sh", workdir)
    assert mask(actual, workdir) == mask(expected, workdir), "re-run make demo into docs/demo.md"


@pytest.mark.spawns
@pytest.mark.parametrize(("page", "command"), TRANSCRIPTS)
def test_transcript_shows_what_its_commands_print(page: str, command: str, workdir: Path) -> None:
    """A block starting with ``$ COMMAND`` shows what its commands print."""
    found = [b for b in blocks(page) if b.startswith(f"$ {command}")]
    assert len(found) == 1, f"{page}: {len(found)} blocks start with $ {command}"
    setup = SETUP.get((page, command))
    if setup is not None:
        run_shell(setup, workdir)
    actual = run_shell(transcript_script(found[0]), workdir)
    want, got = mask(found[0], workdir), mask(actual, workdir)
    if not matches(want, got):
        assert got == want, "a line of ... on the page stands for any lines"


#: What a page must say just before a ``$`` block that the tests do not run, and why not.
ILLUSTRATIVE = re.compile(r"^_Not run by the tests: .+\._$")


def shell_blocks(page: str) -> list[tuple[str, str]]:
    """Each fenced block of ``page`` with a ``$`` command line, and the line before its fence."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        if any(line.startswith("$ ") for line in match.group(1).splitlines()):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            found.append((match.group(1), before))
    return found


def pages() -> list[str]:
    return ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


class TestShellBlocks:
    @pytest.mark.parametrize("page", pages())
    def test_every_shell_block_is_run_or_says_why_not(self, page: str) -> None:
        """A block with ``$`` commands is a transcript the tests run (TRANSCRIPTS), or the line
        before it says, for the reader too, that it is not run and why."""
        ran = [command for listed, command in TRANSCRIPTS if listed == page]
        unchecked = [
            block.splitlines()[0]
            for block, before in shell_blocks(page)
            if not any(block.startswith(f"$ {command}") for command in ran)
            and not ILLUSTRATIVE.match(before)
        ]
        assert unchecked == []

    @pytest.mark.parametrize("page", pages())
    def test_a_transcript_is_not_also_marked_illustrative(self, page: str) -> None:
        """A block the tests run does not say it is not run."""
        ran = [command for listed, command in TRANSCRIPTS if listed == page]
        both = [
            block.splitlines()[0]
            for block, before in shell_blocks(page)
            if any(block.startswith(f"$ {command}") for command in ran)
            and ILLUSTRATIVE.match(before)
        ]
        assert both == []


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


class TestCommandList:
    def command_lines(self) -> dict[str, str]:
        """docs/cli.md's list of commands: each command and what it says of it."""
        (block,) = [b for b in blocks("docs/cli.md") if b.startswith("prunewarden validate ")]
        return dict(line.removeprefix("prunewarden ").split(None, 1) for line in block.splitlines())

    def test_the_page_lists_every_command_in_help_order(self) -> None:
        """docs/cli.md's list of commands is the commands of ``prunewarden --help``."""
        assert list(self.command_lines()) == list(COMMANDS)

    def test_the_page_names_every_subcommand(self) -> None:
        """A command with subcommands (audit, policy) names each in docs/cli.md's list."""
        lines = self.command_lines()
        missing = [
            f"{command} {sub}"
            for command, parser in subcommands(_parser(io.StringIO())).items()
            if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
            for sub in subcommands(parser)
            if not re.search(rf"\b{re.escape(sub)}\b", lines[command])
        ]
        assert missing == []


class TestExitCodes:
    def test_every_exit_code_has_a_meaning(self) -> None:
        """``EXIT_CODE_MEANINGS`` says what each code of ``ExitCode`` means, and nothing else."""
        assert list(EXIT_CODE_MEANINGS) == sorted(ExitCode)

    def test_the_page_shows_the_generated_table(self) -> None:
        """docs/cli.md's table of exit codes is the one generated from ``EXIT_CODE_MEANINGS``
        (paste ``exit_codes_table(EXIT_CODE_MEANINGS)`` when a meaning changes)."""
        text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
        start = text.index("| exit code | meaning |")
        shown = text[start : text.index("\n\n", start) + 1]
        assert shown == exit_codes_table(EXIT_CODE_MEANINGS)
        rows = re.findall(r"^\| (\d+) \|", shown, re.MULTILINE)
        assert [int(code) for code in rows] == [int(code) for code in sorted(ExitCode)]


#: What runs each command of the README's ``sh`` blocks (comments dropped).
README_COMMANDS = {
    "pip install -e .": "tests/test_editable.py, in a fresh venv",
    "make demo": "a dry run here; examples/demo.sh, which it runs, in test_demo_page_...",
    "make test": "a dry run here; what it runs is the suite itself",
}


class TestReadmeCommands:
    def readme_commands(self) -> list[str]:
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        found = re.findall(r"^```sh\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
        return [line.split("#")[0].strip() for block in found for line in block.splitlines()]

    def test_every_command_of_the_readme_is_run(self) -> None:
        """Each command of the README's sh blocks is one a test runs (README_COMMANDS); its
        console blocks are transcripts (TestShellBlocks)."""
        assert sorted(self.readme_commands()) == sorted(README_COMMANDS)

    @pytest.mark.spawns
    @pytest.mark.parametrize(("target", "runs"), [("demo", "examples/demo.sh"), ("test", "pytest")])
    def test_the_make_targets_run_what_the_readme_says(
        self, target: str, runs: str, tmp_path: Path
    ) -> None:
        """``make -n demo`` and ``make -n test`` (a dry run, into a venv that is not made)
        install the package and run the demo's script or pytest."""
        done = subprocess.run(
            ["make", "-n", target, f"VENV={tmp_path / 'venv'}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        assert "pip install -e '." in done.stdout
        assert runs in done.stdout
        assert not (tmp_path / "venv").exists()


def test_python_snippets_import_what_exists() -> None:
    """Every module and name a Python block of the docs imports from prunewarden exists."""
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in PYTHON.findall(page.read_text(encoding="utf-8")):
            for node in ast.walk(ast.parse(block)):
                wanted: list[tuple[str, str | None]]
                if isinstance(node, ast.Import):
                    wanted = [(alias.name, None) for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    wanted = [(node.module, alias.name) for alias in node.names]
                else:
                    continue
                missing += [
                    f"{page.name}: {module}{'.' + name if name else ''}"
                    for module, name in wanted
                    if module.split(".")[0] == "prunewarden" and not importable(module, name)
                ]
    assert missing == []


def importable(module: str, name: str | None) -> bool:
    try:
        imported = importlib.import_module(module)
    except ImportError:
        return False
    return name is None or hasattr(imported, name)
