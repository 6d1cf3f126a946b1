"""Starting is cheap: ``import prunewarden`` loads only the libraries every decision needs, a
policy without rules never loads the CEL runtime, and the command line imports a command's
module only when that command runs.

Each check runs in a fresh interpreter and reads its ``sys.modules``: what this test process
already imported says nothing. How long starting takes is ``make bench``'s business
(benchmarks/start_time.py), not a test's.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import prunewarden
import pytest
from prunewarden.cli._main import COMMANDS, _parser

# The third-party libraries ``import prunewarden`` may load: canonical JSON, YAML policies, the
# compiled validator of the hot path, the per-decision values (msgspec, which loads
# typing_extensions where it is installed, as it is here). Growing this set is a decision, not an
# accident.
IMPORTED_LIBRARIES = ["jsonschema_rs", "msgspec", "orjson", "typing_extensions", "yaml"]

# What must wait until it is used: the CEL runtime, the validator that locates problems, and
# structlog with rich (its console renderer).
DEFERRED = ["celpy", "jsonschema", "lark", "pendulum", "re2", "referencing", "rich", "structlog"]

# The top-level modules a script imports beyond those loaded before it ran, keeping those that
# come from an installed distribution other than prunewarden (not the standard library, and not
# modules without a file such as a C extension's runtime).
LOADED = """
import importlib.metadata, json, sys
before = {name.split(".")[0] for name in sys.modules}
exec(compile(sys.argv[1], "<script>", "exec"))
distributions = importlib.metadata.packages_distributions()
loaded = {name.split(".")[0] for name in sys.modules} - before - set(sys.stdlib_module_names)
print(json.dumps(sorted(
    name for name in loaded if name in distributions and "prunewarden" not in distributions[name]
)))
"""


EXAMPLE_POLICY = Path(__file__).resolve().parent.parent / "examples/compaction/fidelity.yaml"


def loaded_by(script: str) -> list[str]:
    """The third-party top-level modules ``script`` loads, in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", LOADED, script], capture_output=True, text=True, check=True
    )
    names: list[str] = json.loads(result.stdout)
    return names


def cli_modules_after(argv: list[str]) -> list[str]:
    """The modules of ``prunewarden.cli`` loaded by running ``argv``, in a fresh interpreter."""
    script = (
        "import io, json, sys; from prunewarden.cli import run; "
        f"run({argv!r}, io.StringIO(), io.StringIO()); "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('prunewarden.cli'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    names: list[str] = json.loads(result.stdout)
    return names


class TestImport:
    def test_import_loads_only_the_pinned_libraries(self) -> None:
        """import prunewarden loads exactly the pinned third-party libraries, none of those
        that wait for their first use."""
        loaded = loaded_by("import prunewarden")
        assert loaded == IMPORTED_LIBRARIES
        assert set(DEFERRED) & set(loaded) == set()

    def test_deciding_under_a_policy_without_rules_loads_no_cel(self) -> None:
        """Loading a policy without rules and deciding under it loads neither the CEL runtime
        nor structlog."""
        script = (
            "import prunewarden; "
            "engine = prunewarden.Engine(prunewarden.load_builtin_policy('default')); "
            "engine.session('s').observe_cycle({'a': 0.1, 'b': 0.9})"
        )
        cel_and_logging = {"celpy", "lark", "pendulum", "re2", "rich", "structlog"}
        assert cel_and_logging & set(loaded_by(script)) == set()

    def test_a_valid_policy_and_an_audit_log_load_neither_jsonschema_nor_structlog(
        self, tmp_path: Path
    ) -> None:
        """Loading a valid policy file, writing a record to an audit log and deciding with it:
        the validator that locates problems waits for a policy that has one, and an audit log
        writes its records without structlog."""
        script = (
            "import prunewarden; from prunewarden.policy import load_policy; "
            f"policy = load_policy({str(EXAMPLE_POLICY)!r}); "
            f"log = prunewarden.AuditLog({str(tmp_path / 'audit.jsonl')!r}); "
            "log.add_policy(policy); log.write({'kind': 'note'}); "
            "segment = {'id': 't3', 'kind': 'turn', 'tombstone_written': True}; "
            "prunewarden.Engine(policy, audit=log).evaluate({'check': 'eviction', "
            "'segment': segment, 'score': 0.1, 'perturbed_score': 0.1}); log.close()"
        )
        loaded = set(loaded_by(script))
        assert {"jsonschema", "referencing", "structlog"} & loaded == set()

    def test_a_policy_with_rules_loads_cel(self) -> None:
        """The CEL runtime loads when a policy with rules is parsed: the deferral only waits."""
        script = (
            "import prunewarden; prunewarden.parse_policy('''"
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: r, version: 1.0.0}\n"
            "spec:\n  rules:\n  - {name: r, check: eviction, effect: deny, "
            "when: 'score < 0.05', message: m}\n''')"
        )
        assert {"celpy", "lark"} <= set(loaded_by(script))

    def test_every_rules_name_resolves(self) -> None:
        """Each public name of prunewarden.rules resolves on first use; others do not exist."""
        from prunewarden import rules  # noqa: PLC0415 - the package under test

        assert all(getattr(rules, name) is not None for name in rules.__all__)
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = rules.no_such_name


class TestCommandLine:
    @pytest.mark.parametrize("flag", ["--version", "--help"])
    def test_version_and_help_import_no_command(self, flag: str) -> None:
        """--version and --help import none of the commands' modules."""
        modules = cli_modules_after([flag])
        assert modules == ["prunewarden.cli", "prunewarden.cli._common", "prunewarden.cli._main"]

    def test_a_command_imports_its_own_module(self) -> None:
        """Running a command imports its module (and what it imports), not the others."""
        modules = cli_modules_after(["schema", "policy"])
        assert "prunewarden.cli._decide" in modules
        assert not {"prunewarden.cli._replay", "prunewarden.cli._serve"} & set(modules)

    @pytest.mark.parametrize("argv", [["schema", "policy"], ["mcp", "--help"]])
    def test_commands_do_not_load_the_mcp_sdk(self, argv: list[str]) -> None:
        """The MCP SDK loads only when prunewarden mcp serves, not with its help or any
        other command."""
        script = (
            "import io; from prunewarden.cli import run; "
            f"run({argv!r}, io.StringIO(), io.StringIO())"
        )
        loaded = loaded_by(script)
        assert {"mcp", "mcp_types", "uvicorn", "starlette"} & set(loaded) == set()

    @pytest.mark.parametrize("name", list(COMMANDS))
    def test_help_table_matches_each_commands_parser(self, name: str) -> None:
        """The static help line of each command is the one its own parser declares."""
        add, _ = COMMANDS[name].functions()
        parser = _parser(io.StringIO(), name, add)
        (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        declared = {a.dest: a.help for a in commands._get_subactions()}
        assert declared[name] == COMMANDS[name].help

    def test_python_m_prunewarden(self) -> None:
        """python -m prunewarden is the prunewarden command."""
        result = subprocess.run(
            [sys.executable, "-m", "prunewarden", "--version"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (result.returncode, result.stdout, result.stderr) == (
            0,
            f"prunewarden {prunewarden.__version__}\n",
            "",
        )
