"""The built wheel, installed in a fresh venv with only its declared dependencies, finds its
schemas and bundled policies."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from _support.wheels import (
    ROOT,
    build_wheel,
    distribution_name,
    install_wheel,
    isolated_environment,
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and only the dependencies it declares, installed from
    wheels alone (nothing of this environment is visible in it), so that a dependency the wheel
    forgets to declare fails here."""
    work = tmp_path_factory.mktemp("wheel")
    return install_wheel(build_wheel(work), work / "venv")


# The wheel and the pre-commit tests each build the project from a copy of its source tree
# (_support.wheels.copy_project), never in the checkout; one worker runs both (docs/dev/testing.md).
pytestmark = pytest.mark.xdist_group("source-tree")


@pytest.mark.spawns
class TestWheel:
    def test_package_comes_from_the_wheel(self, installed: Path, tmp_path: Path) -> None:
        """The fresh venv imports prunewarden from its own site-packages, with data inside."""
        out = subprocess.run(
            [
                str(installed / "python"),
                "-c",
                (
                    "import prunewarden, prunewarden._resources as r; print(prunewarden.__file__); "
                    "print(r.data_dir('schemas')); print(r.data_dir('policies'))"
                ),
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=isolated_environment(),
        ).stdout.splitlines()
        assert all(str(installed.parent) in line for line in out)
        assert out[1].endswith("prunewarden/_data/schemas")

    def test_only_declared_dependencies_are_installed(self, installed: Path) -> None:
        """The venv holds the wheel's declared dependencies (their requirements met) and
        nothing of the development environment: no test tools, no borrowed site-packages."""
        script = (
            "import importlib.metadata as m, importlib.util as u, json, sys; "
            "names = sorted(d.metadata['Name'].lower() for d in m.distributions()); "
            "print(json.dumps({'names': names, 'requires': m.requires('prunewarden'), "
            "'path': sys.path, "
            "'dev': [n for n in ('pytest', 'hypothesis', 'duckdb') if u.find_spec(n)]}))"
        )
        found = json.loads(
            subprocess.run(
                [str(installed / "python"), "-c", script],
                capture_output=True,
                text=True,
                check=True,
                env=isolated_environment(),
            ).stdout
        )
        assert found["dev"] == []
        assert not any(str(ROOT / ".venv") in entry for entry in found["path"])
        declared = {
            distribution_name(requirement)
            for requirement in found["requires"]
            if "extra ==" not in requirement
        }
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        assert declared == {distribution_name(r) for r in project["dependencies"]}
        assert declared <= {distribution_name(name) for name in found["names"]}
        assert "prunewarden" in found["names"]

    def test_validate_and_evaluate_outside_the_repo(self, installed: Path, tmp_path: Path) -> None:
        """The console script validates a policy, evaluates on the bundled default and prints
        a schema and the catalog from inside the wheel."""
        policy = tmp_path / "p.yaml"
        policy.write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: p, version: 1.0.0}\n"
        )
        validate = subprocess.run(
            [str(installed / "prunewarden"), "validate", str(policy)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            env=isolated_environment(),
        )
        assert validate.returncode == 0, validate.stderr
        document = (ROOT / "examples" / "inputs" / "eviction-utc-constraint.json").read_text()
        evaluate = subprocess.run(
            [str(installed / "prunewarden"), "evaluate", "--audit-log", "audit.jsonl", "-"],
            input=document,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            env=isolated_environment(),
        )
        assert evaluate.returncode == 1, evaluate.stderr
        decision = json.loads(evaluate.stdout)
        assert decision["policy"]["name"] == "default"
        assert decision["reasons"][0]["code"] == "pinned"
        schema = subprocess.run(
            [str(installed / "prunewarden"), "schema", "decision"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=True,
            env=isolated_environment(),
        )
        assert json.loads(schema.stdout)["title"] == "prunewarden decision v1"
        catalog = subprocess.run(
            [str(installed / "prunewarden"), "schema", "--catalog"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=True,
            env=isolated_environment(),
        )
        assert json.loads(catalog.stdout) == json.loads(
            (ROOT / "schemas" / "catalog.json").read_text()
        )

    def test_policy_check_ships_and_names_its_extra(self, installed: Path, tmp_path: Path) -> None:
        """The wheel carries the analysis package; without the analyze extra, policy check
        is a usage error naming the extra (z3 is what is missing, not a module of ours)."""
        check = subprocess.run(
            [str(installed / "prunewarden"), "policy", "check", "builtin:default"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            env=isolated_environment(),
        )
        assert (check.returncode, check.stderr) == (
            2,
            "prunewarden policy check: z3 is missing: pip install 'prunewarden[analyze]'\n",
        )

    def test_policy_suite_outside_the_repo(self, installed: Path, tmp_path: Path) -> None:
        """prunewarden test runs a suite on the bundled default; the suite schema ships inside."""
        (tmp_path / "doc.json").write_text(
            (ROOT / "examples" / "inputs" / "eviction-utc-constraint.json").read_text()
        )
        (tmp_path / "default_test.yaml").write_text(
            "apiVersion: prunewarden/v1\nkind: TestSuite\nname: wheel\npolicy: builtin:default\n"
            "cases:\n  - name: utc constraint is pinned\n    input: {file: doc.json}\n"
            "    expect: {outcome: deny, reasons: [pinned]}\n"
        )
        run = subprocess.run(
            [str(installed / "prunewarden"), "test", "--format", "junit"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            env=isolated_environment(),
        )
        assert run.returncode == 0, run.stderr
        assert 'tests="1" failures="0" errors="0" skipped="0"' in run.stdout


class TestPackageList:
    def test_every_package_of_the_source_tree_is_declared(self) -> None:
        """pyproject's explicit package list names every package under engine/prunewarden (one
        left out ships as stray data at best, and is missing from a hook's install at worst)."""
        declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
            "packages"
        ]
        source = ROOT / "engine"
        found = {
            ".".join(init.parent.relative_to(source).parts)
            for init in (source / "prunewarden").rglob("__init__.py")
            if "_data" not in init.parts
        }
        assert found <= set(declared), sorted(found - set(declared))
