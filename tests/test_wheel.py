"""The built wheel, installed in a fresh venv, finds its schemas and bundled policies."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel installed; dependencies come from this environment
    through a .pth file, so the test runs offline."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("prunewarden-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Dependencies (not prunewarden itself: a plain path entry does not run the editable
    # finder that lives in this environment's .pth files).
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return env_dir / "bin"


@pytest.mark.slow
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
        ).stdout.splitlines()
        assert all(str(installed.parent) in line for line in out)
        assert out[1].endswith("prunewarden/_data/schemas")

    def test_validate_and_evaluate_outside_the_repo(self, installed: Path, tmp_path: Path) -> None:
        """The console script validates a policy and evaluates on the bundled default."""
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
        )
        assert json.loads(schema.stdout)["title"] == "prunewarden decision v1"

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
        )
        assert run.returncode == 0, run.stderr
        assert 'tests="1" failures="0" errors="0" skipped="0"' in run.stdout
